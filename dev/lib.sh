# shellcheck shell=bash
# dev/lib.sh: sourced by the dev/ scripts, from the repository root.
#   apt_need REQ...   install the Debian or Ubuntu packages that are missing
#   gpu_present       whether this machine has an NVIDIA GPU
#   gpu_stack_found   whether the GPU build's CUDA headers and the libraries it
#                     loads at run time are here (where CMake looks for them)
#   gpu_stack_missing [whl]  the headers and libraries that are not
#   gpu_env           LD_LIBRARY_PATH for the wheels dev/setup.sh unpacked in .whl/
#   banner LINE...    a message that cannot be missed, on stderr

# The folders CMake's GPU detection (top-level CMakeLists.txt) looks in, in
# order; with the argument `whl`, only those of the wheels in .whl/.
WHL=${WHL:-$PWD/.whl}
cuda_roots() {
  local r
  [ "${1:-}" != whl ] || return 0
  for r in "${CUDAToolkit_ROOT:-}" "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [ -n "$r" ] && [ -d "$r" ] && echo "$r"
  done
}
cuda_include_dirs() {
  local r
  for r in $(cuda_roots "$@"); do echo "$r/include"; ls -d "$r"/targets/*/include 2>/dev/null; done
  echo "$WHL/nvidia/cu13/include" "$WHL/nvidia/cudnn/include"
  [ "${1:-}" = whl ] || echo /usr/local/include /usr/include "/usr/include/$(uname -m)-linux-gnu"
}
cuda_lib_dirs() {
  local r
  for r in $(cuda_roots "$@"); do echo "$r/lib64" "$r/lib"; done
  echo "$WHL/nvidia/cu13/lib" "$WHL/nvidia/cudnn/lib"
}

# apt_need REQ...: each REQ is a package or alternatives "a|b" (Debian's and
# Ubuntu's names).  A REQ none of whose alternatives is installed gets the
# first alternative that the apt sources know.  Prints nothing when all are
# installed; returns 1, saying which, when a REQ is in no apt source.
APT_UPDATED=${APT_UPDATED:-0}
apt_sudo() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_update_once() { # the package lists, once a run (a fresh machine has none)
  [ "$APT_UPDATED" = 1 ] || apt_sudo apt-get update -q
  APT_UPDATED=1
}
# (no `cmd | grep -q` under pipefail: grep's early exit would fail cmd with SIGPIPE)
apt_installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
apt_known() { grep -q "Candidate: [^(]" <<<"$(apt-cache policy "$1" 2>/dev/null)"; }
apt_need() {
  local req alt chosen missing=() pick=() unknown=()
  for req in "$@"; do
    chosen=""
    for alt in ${req//|/ }; do apt_installed "$alt" && chosen=$alt && break; done
    [ -n "$chosen" ] || missing+=("$req")
  done
  ((${#missing[@]})) || return 0
  apt_update_once
  for req in "${missing[@]}"; do
    chosen=""
    for alt in ${req//|/ }; do apt_known "$alt" && chosen=$alt && break; done
    if [ -n "$chosen" ]; then pick+=("$chosen"); else unknown+=("$req"); fi
  done
  if ((${#pick[@]})); then
    echo "setup: installing ${pick[*]}"
    apt_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pick[@]}"
  fi
  if ((${#unknown[@]})); then
    echo "setup: no package for ${unknown[*]} in this machine's apt sources" \
      "(on Ubuntu: is the universe component enabled?)" >&2
    return 1
  fi
}

# Whether the dynamic linker's cache has library $1, and the file is still
# there (ldconfig is in /sbin).
ld_cached() {
  local cache path
  cache=$({ command -v ldconfig >/dev/null && ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null)
  for path in $(sed -nE "s/^[[:space:]]+${1//./\\.} .*=> (.*)$/\\1/p" <<<"$cache"); do
    [ -e "$path" ] && return 0
  done
  return 1
}

# An NVIDIA GPU: nvidia-smi lists one, or the device node or the driver is there.
gpu_present() {
  { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; } ||
    [ -e /dev/nvidia0 ] || ld_cached libcuda.so.1
}

# The headers the GPU build needs and the libraries the runtime dlopens
# (the driver, libcuda.so.1, comes with the GPU's driver, not from here).
GPU_HEADERS="cuda.h cuda_runtime_api.h crt/host_defines.h nvrtc.h nvtx3/nvToolsExt.h cudnn_graph.h"
GPU_LIBS="libnvrtc.so.13 libcudnn.so.9"
gpu_stack_missing() { # [whl]: prints what is missing (in .whl/ only, with `whl`)
  local h l d found
  for h in $GPU_HEADERS; do
    found=0
    for d in $(cuda_include_dirs "$@"); do [ -f "$d/$h" ] && found=1 && break; done
    ((found)) || echo "$h"
  done
  for l in $GPU_LIBS; do
    found=0
    [ "${1:-}" = whl ] || ! ld_cached "$l" || found=1
    for d in $(cuda_lib_dirs "$@"); do ((found)) || { [ -e "$d/$l" ] && found=1; }; done
    ((found)) || echo "$l"
  done
}
gpu_stack_found() { [ -z "$(gpu_stack_missing "$@")" ]; }

# The wheels' libraries (NVRTC, cuDNN, cuBLAS) for the runtime's dlopen.
gpu_env() {
  local d
  for d in "$WHL/nvidia/cudnn/lib" "$WHL/nvidia/cu13/lib"; do
    [ -d "$d" ] && case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;; esac
  done
  [ -z "${LD_LIBRARY_PATH:-}" ] || export LD_LIBRARY_PATH
}

banner() {
  local line
  {
    echo
    echo "########################################################################"
    for line in "$@"; do echo "## $line"; done
    echo "########################################################################"
    echo
  } >&2
}
