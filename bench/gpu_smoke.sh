#!/usr/bin/env bash
# On the GPU machine: environment, GPU tests, SASS of two candidates, a small tune.
# Usage: bench/gpu_smoke.sh [test-filter...]   (build/ built elsewhere and carried)
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
export BT_ROOT=$PWD BT_TUNE=$PWD/build/tune BT_TEST_CACHE=/tmp/btcache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
ls /usr/local/cuda/lib64/libnvrtc.so* 2>&1 | head -3
ldd build/tune | grep -E "nvrtc|cjson|not found"
echo "== GPU tests"
build/tests/unit "${@:-gpu_}" 2>&1 | tee "$out/gpu_tests.log" | tail -40
echo "== SASS"
for f in $(ls /tmp/btcache/sm_90a/*/*.cubin 2>/dev/null | head -400); do
  s=$(cuobjdump -sass "$f" 2>/dev/null | grep -oE "\b(QGMMA|HGMMA|IGMMA|HMMA|IMMA|QMMA)[.A-Z0-9_]*" | sort | uniq -c | tr '\n' ' ')
  echo "$s"
done | sort | uniq -c | sort -rn | head -12
