#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REPLAYS 10
#define TARGET_REPLAY_US 2000.0 /* long enough that event resolution and jitter vanish */
#define MAX_LAUNCHES 400

#define STR(x) #x
#define XSTR(x) STR(x) /* a macro's value as a string literal */

const char *bt_bench_method(void)
{
    return "CUDA graph of back-to-back launches rotating over input copies totalling >= 4x L2; "
           "one warm-up replay; median of " XSTR(REPLAYS) " replays timed with CUDA events; "
           "per batch size the " XSTR(BT_FINALISTS) " fastest candidates and the default timed again in "
           XSTR(BT_FINAL_ROUNDS) " interleaved rounds, each time after the GPU has idled for rest_ms, "
           "each one's median kept";
}

int bt_rotation_make(bt_gpu *g, const bt_problem *p, size_t min_bytes, bt_rotation *r, bt_err *err)
{
    int rc = -1;
    memset(r, 0, sizeof *r);
    size_t per_set = p->a_bytes + p->b_bytes + p->as_bytes + p->bs_bytes + p->c_bytes;
    int n = (int)((min_bytes + per_set - 1) / per_set);
    n = n < 2 ? 2 : n > BT_BENCH_MAXSETS ? BT_BENCH_MAXSETS : n;
    r->sets[0] = p->args;
    r->nsets = 1;
    for (int i = 1; i < n; i++) {
        bt_gemm_args *s = &r->sets[i];
        *s = p->args;
        s->A = s->B = s->As = s->Bs = s->C = 0;
        r->owned[i] = 1;
        r->nsets = i + 1;
        BT_CU(&g->cu, cuMemAlloc(&s->A, p->a_bytes), err, "allocating an input copy");
        BT_CU(&g->cu, cuMemAlloc(&s->B, p->b_bytes), err, "allocating an input copy");
        BT_CU(&g->cu, cuMemAlloc(&s->As, p->as_bytes), err, "allocating an input copy");
        BT_CU(&g->cu, cuMemAlloc(&s->Bs, p->bs_bytes), err, "allocating an input copy");
        BT_CU(&g->cu, cuMemAlloc(&s->C, p->c_bytes), err, "allocating an output copy");
        BT_CU(&g->cu, cuMemcpyDtoDAsync(s->A, p->args.A, p->a_bytes, g->stream), err, "copying inputs");
        BT_CU(&g->cu, cuMemcpyDtoDAsync(s->B, p->args.B, p->b_bytes, g->stream), err, "copying inputs");
        BT_CU(&g->cu, cuMemcpyDtoDAsync(s->As, p->args.As, p->as_bytes, g->stream), err, "copying inputs");
        BT_CU(&g->cu, cuMemcpyDtoDAsync(s->Bs, p->args.Bs, p->bs_bytes, g->stream), err, "copying inputs");
    }
    BT_CU(&g->cu, cuStreamSynchronize(g->stream), err, "copying inputs");
    rc = 0;
out:
    if (rc)
        bt_rotation_free(g, r);
    return rc;
}

void bt_rotation_free(bt_gpu *g, bt_rotation *r)
{
    for (int i = 0; i < r->nsets; i++) {
        if (!r->owned[i])
            continue;
        CUdeviceptr bufs[] = {r->sets[i].A, r->sets[i].B, r->sets[i].As, r->sets[i].Bs, r->sets[i].C};
        for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++)
            if (bufs[j])
                g->cu.cuMemFree(bufs[j]);
    }
    memset(r, 0, sizeof *r);
}

/* Microseconds of one replay of exec, between two events on the stream. */
static int time_replay(bt_gpu *g, CUgraphExec exec, CUevent e0, CUevent e1, double *us, bt_err *err)
{
    int rc = -1;
    float ms = 0;
    BT_CU(&g->cu, cuEventRecord(e0, g->stream), err, "recording an event");
    BT_CU(&g->cu, cuGraphLaunch(exec, g->stream), err, "replaying the graph");
    BT_CU(&g->cu, cuEventRecord(e1, g->stream), err, "recording an event");
    BT_CU(&g->cu, cuEventSynchronize(e1), err, "running the kernel");
    BT_CU(&g->cu, cuEventElapsedTime(&ms, e0, e1), err, "reading events");
    *us = ms * 1000.0;
    rc = 0;
out:
    return rc;
}

int bt_bench(bt_gpu *g, const bt_kernel *k, const bt_rotation *r, double prune_us, int programmatic,
             bt_timing *t, bt_err *err)
{
    int rc = -1, capturing = 0;
    CUevent e0 = NULL, e1 = NULL;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    double times[REPLAYS], est;
    memset(t, 0, sizeof *t);
    BT_CU(&g->cu, cuEventCreate(&e0, CU_EVENT_DEFAULT), err, "creating events");
    BT_CU(&g->cu, cuEventCreate(&e1, CU_EVENT_DEFAULT), err, "creating events");

    /* Estimate from one launch per set (warm): sizes the graph so a replay lasts ~2 ms. */
    BT_CU(&g->cu, cuEventRecord(e0, g->stream), err, "recording an event");
    for (int i = 0; i < r->nsets; i++)
        if (bt_kernel_launch(g, k, &r->sets[i], g->stream, programmatic, err))
            goto out;
    BT_CU(&g->cu, cuEventRecord(e1, g->stream), err, "recording an event");
    BT_CU(&g->cu, cuEventSynchronize(e1), err, "running the kernel");
    {
        float ms;
        BT_CU(&g->cu, cuEventElapsedTime(&ms, e0, e1), err, "reading events");
        est = ms * 1000.0 / r->nsets;
    }
    int launches = (int)ceil(TARGET_REPLAY_US / (est > 0.5 ? est : 0.5));
    launches = launches < r->nsets ? r->nsets : launches > MAX_LAUNCHES ? MAX_LAUNCHES : launches;

    BT_CU(&g->cu, cuStreamBeginCapture(g->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), err, "capturing");
    capturing = 1;
    for (int i = 0; i < launches; i++)
        if (bt_kernel_launch(g, k, &r->sets[i % r->nsets], g->stream, programmatic, err))
            goto out;
    capturing = 0;
    BT_CU(&g->cu, cuStreamEndCapture(g->stream, &graph), err, "capturing");
    BT_CU(&g->cu, cuGraphInstantiateWithFlags(&exec, graph, 0), err, "instantiating the graph");

    double warm;
    if (time_replay(g, exec, e0, e1, &warm, err))
        goto out;
    t->launches = launches;
    for (int i = 0; i < REPLAYS; i++) {
        if (time_replay(g, exec, e0, e1, &times[i], err))
            goto out;
        times[i] /= launches;
        t->replays = i + 1;
        if (i == 0 && prune_us > 0 && times[0] > prune_us) {
            t->us = times[0];
            t->pruned = 1;
            rc = 0;
            goto out;
        }
    }
    t->us = bt_median(times, REPLAYS);
    t->spread = (times[REPLAYS - 1] - times[0]) / t->us;
    rc = 0;
out:
    if (capturing) {
        CUgraph junk = NULL;
        g->cu.cuStreamEndCapture(g->stream, &junk);
        if (junk)
            g->cu.cuGraphDestroy(junk);
    }
    if (exec)
        g->cu.cuGraphExecDestroy(exec);
    if (graph)
        g->cu.cuGraphDestroy(graph);
    if (e0)
        g->cu.cuEventDestroy(e0);
    if (e1)
        g->cu.cuEventDestroy(e1);
    return rc;
}
