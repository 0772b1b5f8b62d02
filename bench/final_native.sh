#!/usr/bin/env bash
# On the GPU machine, one session: the native family's GPU tests, the cluster evidence on one
# shape, the native tune of the 13 DeepSeek-V3 tp-8 shapes, and the peer (cuBLASLt through
# torch) on the same shapes and batch sizes. Logs and configs land in $OUT.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
export BT_ROOT=$PWD BT_TUNE=$PWD/build/tune BT_TEST_CACHE=/tmp/btcache BT_GPU_TESTS=1
build/tests/unit gpu_native gpu_tune_survives > "$out/gpu_tests.log" 2>&1; tail -3 "$out/gpu_tests.log"
bash bench/tune_runs.sh native-focus:24576:7168 native-tp8 > "$out/runs.log" 2>&1
grep -E "^== |pruned\)$" "$out/runs.log" | head -3; grep -c "pruned)" "$out/runs.log"
shapes=576x7168,24576x7168,32768x512,7168x16384,7168x18432,4608x7168,3072x7168,4096x512,3072x1536,512x7168,7168x2304,7168x2048,7168x256
python3 bench/peer.py --shapes $shapes --ms 1,16,64,128,512,2048,4096 > "$out/peer.jsonl" 2> "$out/peer.err"
echo "peer: $(grep -c '"us"' "$out/peer.jsonl") timed"
