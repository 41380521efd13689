#!/bin/bash
# check_step.sh NETRUN ROOT WORKDIR: `netrun step` on smallcnn with random
# weights (tests/torch/step_smallcnn.py; plain Python, no torch or numpy).
set -u
netrun=$1 root=$2 work=$3
netc=$(dirname "$netrun")/netc
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
rm -rf "$work" && mkdir -p "$work" || exit 1
python3 "$root/tests/torch/step_smallcnn.py" "$netc" "$netrun" "$root" "$work"
