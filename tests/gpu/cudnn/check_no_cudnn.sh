#!/bin/sh
# check_no_cudnn.sh TEST - with $NETC_CUDNN naming a library that does not
# exist, test_cudnn_conv prints "skipped: ..." and exits 77: on a GPU
# machine because cuDNN is missing, elsewhere because the driver is.
export NETC_CUDNN=libcudnn-netc-missing.so.9
out=$("$1" --no-bench); rc=$?
echo "$out"
[ "$rc" -eq 77 ] || { echo "FAIL: exited $rc, want 77"; exit 1; }
case "$out" in
  "skipped: no cuDNN (libcudnn-netc-missing.so.9 not found)") ;;
  "skipped: no CUDA driver"*|"skipped: no usable GPU"*|"skipped: no GPU"*) ;;
  *) echo "FAIL: unexpected output"; exit 1 ;;
esac
echo "ok"
