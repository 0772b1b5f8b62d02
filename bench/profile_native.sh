#!/usr/bin/env bash
# Nsight Compute on one native config at one GEMM: bench/variants.py times that config alone
# (no cuBLASLt), so every bt_native_gemm launch, and so the third one, which is profiled, is its
# kernel (variants.py's line says "heuristic_instead" where the device cannot run the config).
# Usage: bench/profile_native.sh N K M BM BN STAGES CLUSTER [OUT-FILE]
#        (GROUP_SIZE_M from $GM, default 8; SPLIT_K from $SPLIT, default 1)
set -u
N=$1 K=$2 M=$3 BM=$4 BN=$5 S=$6 CL=$7 out=${8:-/dev/stdout}
ncu --clock-control none --kernel-name bt_native_gemm --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    --section SchedulerStats --section SourceCounters --section InstructionStats \
    python3 "$(dirname "$0")/variants.py" --shapes "${N}x${K}" --ms "$M" \
    --variant "profiled=$BM,$BN,$S,${GM:-8},$CL,${SPLIT:-1}" --no-peer --cache /tmp/btcache > "$out" 2>&1
