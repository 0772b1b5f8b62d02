#!/usr/bin/env bash
# ncu on one native candidate inside a real tune run (the GPU worker is profiled as a child):
# bench/profile_native.sh N K M BM BN STAGES [OUT-FILE]
set -u
N=$1 K=$2 M=$3 BM=$4 BN=$5 S=$6 out=${7:-/dev/stdout}
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
Y
ncu --clock-control none --target-processes all --kernel-name bt_native_gemm --launch-skip 3 \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis_Chart \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,dram__bytes.sum.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,sm__cycles_active.avg \
    build/tune --family native --space "$space" --N "$N" --K "$K" --out-dir /tmp/prof-out \
    --cache-dir /tmp/btcache --quiet --out-dtype bfloat16 > "$out" 2>&1
rm -f "$space"
