#!/usr/bin/env bash
# Nsight Compute on one native candidate inside a real tune run (the GPU worker is profiled as
# a child process). The space holds that candidate only and it is also the shape's runtime
# default, so every profiled launch is that kernel.
# Usage: bench/profile_native.sh N K M BM BN STAGES CLUSTER [OUT-FILE]
set -u
N=$1 K=$2 M=$3 BM=$4 BN=$5 S=$6 CL=$7 out=${8:-/dev/stdout}
space=$(mktemp --suffix=.yaml)
cat > "$space" <<Y
name: one
family: native
batch_sizes: [$M]
parameters:
  BLOCK_SIZE_M: [$BM]
  BLOCK_SIZE_N: [$BN]
  num_stages: [$S]
  GROUP_SIZE_M: [8]
  CLUSTER_M: [$CL]
  SPLIT_K: [${SPLIT:-1}]
Y
ncu --clock-control none --target-processes all --kernel-name bt_native_gemm --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    --section SchedulerStats --section SourceCounters \
    build/tune --family native --space "$space" --N "$N" --K "$K" --out-dir /tmp/prof-out \
    --cache-dir /tmp/btcache --quiet --out-dtype bfloat16 > "$out" 2>&1
rm -f "$space"
