#!/usr/bin/env bash
# On the GPU machine: the tuning runs behind configs/ and BENCHMARKS.md. Each run's output goes
# to $OUT/<name>.log and its configs to $OUT/configs.tar.
# Usage: bench/tune_runs.sh RUN...   RUN: tp8-small | default:N:K | full7:N:K | full7-int8:N:K |
#        classic4w:N:K | classic4w-int8:N:K | classic-default:N:K | classic-default-int8:N:K | classic10:N:K |
#        classic-large:N:K |
#        native-tp8 | native:N:K | native-int8:N:K | native-focus:N:K
# (full7:N:K: SGLang's full classic space at the side by side's 7 batch sizes, 85-160 s a shape on
# an H100 once its 992 kernels are compiled, about 60 s on 16 cores; the classic configs shipped.
# classic10:N:K: the same space at the native files' 10 batch sizes, 126-220 s a shape on an H200;
# the H200 classic configs shipped. full7-int8:N:K: full7 on INT8 inputs, the H100's int8_w8a8
# classic configs shipped. classic4w:N:K and classic4w-int8:N:K: FP8 or INT8 at 512, 2048 and 4096
# with num_warps 4 only (bench/spaces/classic_4warps.yaml), the large-M entries of the shipped files;
# BATCH_SIZES=256,1024,3072 (say) runs them at other batch sizes instead. classic-default:N:K and
# classic-default-int8:N:K: the same batch sizes with SGLang's default config alone
# (bench/spaces/classic_default.yaml), entries to adopt where Triton runs it faster.
# classic-large:N:K: SGLang's full classic space at 512-4096 (BATCH_SIZES to change them), about
# 15 s a batch size on an H100; the output-bound shapes re-tuned after the classic kernel's
# 16-byte stores.)
# (native-tp8 with the native space, 750 candidates runnable for FP8 at its 10 batch sizes, takes about 25 minutes
# on an H100: 65-107 s a shape at 7 batch sizes, about 32 s more for 256, 1024 and 3072; native:N:K
# tunes one shape into the same directory, so the 13 shapes can be split across calls;
# native-int8:N:K the same with INT8 inputs, whose space is about twice FP8's: INT8_CONVERT 0 and 1.)
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/configs
cache=/tmp/btcache
bash bench/unpack_caches.sh $cache
for run in "$@"; do
    IFS=: read -r kind N K <<<"$run"
    log="$out/${kind}${N:+-$N-$K}.log"
    start=$(date +%s)
    case $kind in
    tp8-small) build/tune --tp-size 8 --space search_spaces/small.yaml --out-dir /tmp/configs --cache-dir $cache --resume ;;
    default) build/tune --N "$N" --K "$K" --out-dir /tmp/configs --cache-dir $cache --resume ;;
    full7|full7-int8|classic10)
        bs=1,16,64,128,512,2048,4096
        [ "$kind" = classic10 ] && bs=1,16,64,128,256,512,1024,2048,3072,4096
        in=fp8; [ "$kind" = full7-int8 ] && in=int8
        build/tune --N "$N" --K "$K" --input-type $in --space search_spaces/default.yaml --batch-sizes $bs \
            --out-dir /tmp/configs --cache-dir $cache --resume ;;
    classic-large)
        build/tune --N "$N" --K "$K" --space search_spaces/default.yaml --batch-sizes "${BATCH_SIZES:-512,1024,1536,2048,3072,4096}" \
            --out-dir /tmp/configs --cache-dir $cache --resume ;;
    classic4w|classic4w-int8|classic-default|classic-default-int8)
        in=fp8; [ "${kind%-int8}" != "$kind" ] && in=int8
        space=bench/spaces/classic_4warps.yaml; [ "${kind#classic-default}" != "$kind" ] && space=bench/spaces/classic_default.yaml
        build/tune --N "$N" --K "$K" --input-type $in --space $space \
            --batch-sizes "${BATCH_SIZES:-512,2048,4096}" --out-dir /tmp/configs --cache-dir $cache --resume ;;
    native-tp8) build/tune --family native --tp-size 8 --out-dtype bfloat16 --out-dir /tmp/configs --cache-dir $cache --resume ;;
    native) build/tune --family native --N "$N" --K "$K" --out-dtype bfloat16 --out-dir /tmp/configs --cache-dir $cache --resume ;;
    native-int8) build/tune --family native --input-type int8 --N "$N" --K "$K" --out-dtype bfloat16 --out-dir /tmp/configs \
                     --cache-dir $cache --resume ;;
    native-focus) build/tune --family native --space bench/spaces/native_large_m.yaml --N "$N" --K "$K" \
                      --out-dtype bfloat16 --out-dir /tmp/native-focus --cache-dir $cache --top 30 ;;
    esac > "$log" 2>&1
    echo "== $run: exit $? in $(( $(date +%s) - start )) s"
    # After every run, so that a call cut off at its time limit keeps what it wrote (and
    # in a tar: the device tool does not bring back names with commas and spaces).
    tar -C /tmp -cf "$out/configs.tar" configs
    grep -vE "skipped \(|^\[" "$log" | tail -n 60
done
