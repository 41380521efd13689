# bench/cifar10_setup.sh: sourced by the CIFAR-10 convergence scripts
# (cifar10_convergence.sh, fp8_convergence.sh) from the repository root with
# their arguments [NETRUN] [EPOCHS] [CACHE]: sets netrun, epochs, out ($OUT,
# made when missing, else a fresh folder), dir (the ImageFolder: $CIFAR_DIR,
# default /tmp/cifar10, extracted from $CIFAR10_TAR, default
# shared/data/cifar10-jpeg.tar.gz, when it has no train/), cache_opt (the
# --cache option, or none) and the per-channel mean and std of the recipe.
netrun=${1:-build/release/netrun}
epochs=${2:-15}
cache=${3:-}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
tarball=${CIFAR10_TAR:-../shared/data/cifar10-jpeg.tar.gz}
dir=${CIFAR_DIR:-/tmp/cifar10}
if [ ! -d "$dir/train" ]; then
  mkdir -p "$dir" && tar xzf "$tarball" -C "$dir" || { echo "cannot extract $tarball into $dir"; exit 1; }
fi
cache_opt=()
[ -n "$cache" ] && cache_opt=(--cache "$cache")
mean=0.4914,0.4822,0.4465 std=0.2470,0.2435,0.2616
