#!/usr/bin/env bash
# On the GPU machine, the measurements behind BENCHMARKS.md (two device calls of at most 10
# minutes: `bench/final_native.sh tests` then `bench/final_native.sh tune`). Logs, configs and
# the peer's timings land in $OUT.
#   tests: every GPU test, then FP8 against INT8 on three shapes at large M
#   tune:  the native family and the small classic space on the 13 DeepSeek-V3 tp-8 shapes,
#          then cuBLASLt's block-scaled GEMM (bench/peer.py) on the same shapes and batch sizes
#   native: the native family and cuBLASLt (bf16 out) only, for a kernel change that leaves the
#          classic kernel as it was
#   sidebyside: the shipped configs (configs/) of both families and cuBLASLt on the same GEMMs,
#          interleaved in one process (bench/sidebyside.py): the comparison table
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
export BT_ROOT=$PWD BT_TUNE=$PWD/build/tune BT_TEST_CACHE=/tmp/btcache BT_GPU_TESTS=1
bash bench/unpack_caches.sh /tmp/btcache
shapes=576x7168,24576x7168,32768x512,7168x16384,7168x18432,4608x7168,3072x7168,4096x512,3072x1536,512x7168,7168x2304,7168x2048,7168x256
case ${1:-} in
tests)
    build/tests/unit gpu_ cuda_gpu > "$out/gpu_tests.log" 2>&1; tail -1 "$out/gpu_tests.log"
    for shape in 24576:7168 7168:2304 7168:18432; do
        IFS=: read -r N K <<<"$shape"
        for in in fp8 int8; do
            build/tune --family native --input-type $in --space bench/spaces/native_large_m.yaml --N "$N" --K "$K" \
                --out-dtype bfloat16 --out-dir /tmp/$in --cache-dir /tmp/btcache --top 3 > "$out/$in-$N-$K.log" 2>&1
            grep -A2 "best config" "$out/$in-$N-$K.log" | tail -2
        done
    done ;;
tune)
    bash bench/tune_runs.sh native-tp8 tp8-small > "$out/runs.log" 2>&1; grep -E "^== " "$out/runs.log"
    python3 bench/peer.py --shapes $shapes --ms 1,16,64,128,512,2048,4096 > "$out/peer.jsonl" 2> "$out/peer.err"
    python3 bench/peer.py --out-dtype float16 --shapes $shapes --ms 16,64,128,512,2048,4096 > "$out/peer_f16.jsonl" 2>> "$out/peer.err"
    python3 bench/peer.py --out-dtype float16 --shapes 7168x2304,576x7168,24576x7168 \
        --ms 2,4,8,24,32,48,96,256,1024,1536,3072 >> "$out/peer_f16.jsonl" 2>> "$out/peer.err"
    echo "peer: $(grep -c '"us"' "$out/peer.jsonl") + $(grep -c '"us"' "$out/peer_f16.jsonl") timed" ;;
native)
    bash bench/tune_runs.sh native-tp8 > "$out/runs.log" 2>&1; grep -E "^== " "$out/runs.log"
    python3 bench/peer.py --shapes $shapes --ms 1,16,64,128,512,2048,4096 > "$out/peer.jsonl" 2> "$out/peer.err"
    echo "peer: $(grep -c '"us"' "$out/peer.jsonl") timed" ;;
sidebyside)
    for fam in native classic; do # fill the library's cache: both families' spaces, bf16 out
        space=search_spaces/native.yaml; [ $fam = classic ] && space=search_spaces/small.yaml
        build/tune --family $fam --space $space --tp-size 8 --dry-run --arch sm_90a --out-dtype bfloat16 \
            --cache-dir /tmp/sbs-cache -j16 > /dev/null 2>&1
    done
    python3 bench/sidebyside.py --configs configs --cache /tmp/sbs-cache --shapes $shapes \
        --ms 1,16,64,128,512,2048,4096 > "$out/sidebyside.jsonl" 2> "$out/sidebyside.err"
    echo "sidebyside: $(grep -c '^{' "$out/sidebyside.jsonl") points"; tail -3 "$out/sidebyside.err" ;;
*) echo "usage: bench/final_native.sh tests|tune|native|sidebyside" >&2; exit 2 ;;
esac
