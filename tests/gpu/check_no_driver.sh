#!/bin/sh
# check_no_driver.sh ELTWISE INFO - with no CUDA driver, test_gpu_eltwise
# prints "skipped: no CUDA driver (<lib> not found)" and exits 77, and
# netc-gpu-info prints "no GPU: ..." and exits 77.  $NETC_CUDA_DRIVER
# names a library that does not exist, so this holds on a GPU machine too.
export NETC_CUDA_DRIVER=libcuda-netc-missing.so.1
out=$("$1"); rc=$?
echo "$out"
[ "$rc" -eq 77 ] || { echo "FAIL: test_gpu_eltwise exited $rc, want 77"; exit 1; }
[ "$out" = "skipped: no CUDA driver (libcuda-netc-missing.so.1 not found)" ] ||
  { echo "FAIL: unexpected output"; exit 1; }
out=$("$2"); rc=$?
echo "$out"
[ "$rc" -eq 77 ] || { echo "FAIL: netc-gpu-info exited $rc, want 77"; exit 1; }
echo "$out" | grep -qx "no GPU: no CUDA driver (libcuda-netc-missing.so.1 not found)" ||
  { echo "FAIL: netc-gpu-info did not say no GPU"; exit 1; }
echo "ok"
