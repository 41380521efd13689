#!/usr/bin/env bash
# check_names.sh NETC MODEL.net TORCHVISION.names: the model's parameters and
# state, in order, with their shapes, are torchvision's state_dict (the
# .names file, written by torchvision/names.py) less its batch norms'
# num_batches_tracked counters, which netc does not keep: so weights saved by
# torchvision load by name.
set -uo pipefail
netc=$1 model=$2 names=$3
got=$("$netc" --no-loc --print-after=parse "$model" |
  sed -nE 's/^  (param|state) @([^ ]+) : [a-z0-9]+\[([^]]*)\].*/\2 [\3]/p') || { echo "netc failed on $model"; exit 1; }
want=$(grep -v '^#' "$names" | grep -v '\.num_batches_tracked ')
if [ "$got" = "$want" ]; then
  echo "$model: $(wc -l <<<"$got") tensors, torchvision's names and shapes"
  exit 0
fi
echo "$model: tensors differ from $names (< torchvision, > netc):"
diff <(echo "$want") <(echo "$got") | head -n 40
exit 1
