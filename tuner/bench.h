/* Timing one GEMM kernel honestly: CUDA-graph replays of back-to-back launches that rotate over
 * enough copies of the inputs that the weights are not served from L2, after warm-up, timed
 * with CUDA events; the median of the replays. */
#ifndef BT_BENCH_H
#define BT_BENCH_H

#include "gpu.h"

/* Enough for 4x the H100's and H200's 50 MB of L2 at every DeepSeek-V3 shape: the smallest,
 * (7168, 256) at M = 1, is 1.85 MB a set (with 64 sets, until 2026-11-24, it came to 2.3x). */
#define BT_BENCH_MAXSETS 128
/* Once every candidate of a batch size is timed, the BT_FINALISTS fastest and the default (and
 * the fastest of each value of the family's finalist_key) are timed again in BT_FINAL_ROUNDS
 * interleaved rounds (tune.c). Eight, not three: at INT8 M = 128
 * on the H200 a config 5% faster side by side was outside the first pass's three fastest in
 * five tunes of six (BENCHMARKS.md, "The tuner's finalists: eight, not three"). */
#define BT_FINALISTS 8
/* Room beside them for the fastest candidate of each value of the family's finalist_key. */
#define BT_FINALIST_KEYS 4
#define BT_FINAL_ROUNDS 3

/* Copies of one problem's buffers (set 0 is the verified one). */
typedef struct {
    int nsets;
    bt_gemm_args sets[BT_BENCH_MAXSETS];
    bt_problem owner; /* set 0's allocation */
    int owned[BT_BENCH_MAXSETS];
} bt_rotation;

/* Makes copies of p until their bytes reach at least min_bytes (and at least 2 sets). */
int bt_rotation_make(bt_gpu *g, const bt_problem *p, size_t min_bytes, bt_rotation *r, bt_err *err);
void bt_rotation_free(bt_gpu *g, bt_rotation *r);

typedef struct {
    double us;       /* median time of one GEMM, microseconds */
    double spread;   /* (max - min) / median over the replays */
    int launches;    /* launches per replay */
    int replays;     /* timed replays (1 when pruned) */
    int pruned;      /* first replay over prune_us: not timed further */
} bt_timing;

/* Times k over the rotation, launched with programmatic dependent launch if programmatic (and
 * the family allows it). prune_us > 0: after one timed replay slower than prune_us the
 * candidate is reported pruned with that estimate (it cannot be the best). */
int bt_bench(bt_gpu *g, const bt_kernel *k, const bt_rotation *r, double prune_us, int programmatic,
             bt_timing *t, bt_err *err);

/* The method in one line, for provenance sidecars and BENCHMARKS.md. */
const char *bt_bench_method(void);

#endif
