#!/usr/bin/env bash
# On the GPU machine: what one native candidate compiles to (registers, spills, tensor-core and
# memory-barrier instructions in the SASS) and the focus space on chosen shapes, cluster 1 vs 2.
# Usage: bench/probe_native.sh N:K... (each timed at M = 2048 and 4096; logs in $OUT)
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
cache=/tmp/btcache
space=$(mktemp --suffix=.yaml)
cat > "$space" <<Y
name: probe
family: native
batch_sizes: [1]
parameters:
  BLOCK_SIZE_M: [128]
  BLOCK_SIZE_N: [128]
  num_stages: [6]
  GROUP_SIZE_M: [8]
  CLUSTER_M: [1, 2]
  SPLIT_K: [1]
Y
rm -rf /tmp/probe-cache
build/tune --family native --space "$space" --N 24576 --K 7168 --dry-run --arch sm_90a \
    --cache-dir /tmp/probe-cache --out-dtype bfloat16 > /dev/null 2>&1
for f in /tmp/probe-cache/sm_90a/*/*.cubin; do
    cuobjdump -sass "$f" > "$f.sass"
    echo "$(grep -E '^regs|^spill' "${f%.cubin}.meta" | tr '\n' ' ')$(grep -oE '\b(QGMMA|IGMMA|STL|LDL|MEMBAR|FENCE|SYNCS|UCGABAR|LDGSTS)[.A-Z0-9_]*' "$f.sass" | sort | uniq -c | tr -s ' \n' ' ')"
    grep -B3 -A1 -E '\b(STL|LDL)' "$f.sass" | head -40 > "$out/spill-$(basename "$f" .cubin | cut -c1-8).txt"
done
rm -f "$space"
for shape in "$@"; do
    IFS=: read -r N K <<<"$shape"
    build/tune --family native --space bench/spaces/native_large_m.yaml --N "$N" --K "$K" \
        --out-dtype bfloat16 --out-dir /tmp/native-probe --cache-dir $cache --top 30 > "$out/focus-$N-$K.log" 2>&1
    echo "== $N x $K: exit $?"; grep -A3 "best config" "$out/focus-$N-$K.log"
    grep -E ",8,2 " "$out/focus-$N-$K.log" | head -4
done
