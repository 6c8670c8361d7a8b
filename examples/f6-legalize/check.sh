#!/bin/sh
# Interesting (exit 0) while the pinned iree-compile still fails to legalize the
# f6E2M3FN truncation for the CPU backend.
iree-compile "$1" --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
  --iree-llvmcpu-target-cpu=generic -o /dev/null 2>&1 \
  | grep -q "failed to legalize operation 'arith.truncf'"
