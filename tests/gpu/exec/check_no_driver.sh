#!/bin/sh
# Without a CUDA driver test_gpu_exec still checks what needs no GPU, then
# says why it skips and exits 77: run with a driver name that never exists.
# Usage: check_no_driver.sh TEST_GPU_EXEC SOURCE_DIR
out=$(NETC_CUDA_DRIVER=/nonexistent/libcuda-netc-test.so.1 "$1" "$2" 2>&1)
rc=$?
echo "$out"
if [ "$rc" -ne 77 ]; then
  echo "check_no_driver: expected exit 77, got $rc" >&2
  exit 1
fi
echo "$out" | grep -q "skipped: no CUDA driver (/nonexistent/libcuda-netc-test.so.1 not found)" || {
  echo "check_no_driver: the skip message does not say why" >&2
  exit 1
}
