#include "tune.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "configio.h"
#include "cuda.h"
#include "fanout.h"
#include "family.h"
#include "gpu.h"
#include "jit.h"
#include "journal.h"
#include "progress.h"
#include "searchspace.h"
#include "shapes.h"
#include "worker.h"

#define PRUNE_FACTOR 1.5 /* a candidate this much slower than the best so far is not timed further */

typedef struct {
    bt_cand cand;
    bt_jit_job job;
    char *source;
} compiled;

/* A run on several GPUs (--devices) forks one process per GPU (fanout.c); they take shapes from
 * one counter and report progress through these, in memory they share with the parent. */
typedef struct {
    atomic_llong units_milli, skipped_milli; /* bt_progress_update's and _skip's units, x 1000 */
    atomic_int shape;                        /* 1 + the shape being tuned, 0 between shapes */
} fan_slot;
typedef struct {
    atomic_int next_shape, done_shapes, failed_shapes;
    fan_slot slot[]; /* one per GPU process */
} fan_shared;

typedef struct {
    const bt_options *o;
    volatile sig_atomic_t *stop;
    int device;     /* the GPU this process measures on */
    fan_slot *slot; /* in a GPU process of a run on several: its progress counters */
    const bt_family *fam;
    bt_space space;
    char space_path[4096];
    bt_variant variant;
    bt_shape *shapes;
    int nshapes;
    const long *batch;
    int nbatch;
    bt_target target;
    int have_device;
    bt_device_info dev;
    size_t ncands_total;
    size_t rejected[BT_REJ_COUNT];
    compiled *cands; /* survivors, then runtime default configs the space lacks */
    size_t ncands;
    size_t nspace;     /* cands[0..nspace) are the space's survivors */
    size_t compiled_now, cached, failed;
    double compile_s;
    bt_jit *jit;
    bt_progress *prog;
    sigset_t stop_sigs; /* SIGINT and SIGTERM, held back from NVRTC while compiling */
    int caught;         /* one of them, taken while compiling */
} run;

/* ---------------- setup ---------------- */

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* Default spaces are found beside the working directory or the executable. */
static int resolve_space(run *r, bt_err *err)
{
    const char *given = r->o->space_path;
    char def[64];
    snprintf(def, sizeof def, "search_spaces/%s.yaml",
             strcmp(r->o->family, "native") == 0 ? "native" : "default");
    const char *want = given ? given : def;
    if (given || file_exists(want)) {
        if (bt_sprintf(r->space_path, sizeof r->space_path, "%s", want))
            return bt_fail(err, "--space: path too long");
        return 0;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        if (bt_sprintf(r->space_path, sizeof r->space_path, "%s/../%s", exe, want) == 0 &&
            file_exists(r->space_path))
            return 0;
    }
    return bt_fail(err, "--space: default search space %s not found (pass --space FILE)", want);
}

/* A shape listed twice (DeepSeek-V3's list at tp = 1, as SGLang's, has four; a model's
 * projections can share one) is tuned once: a second tune would only write its file again. */
static void drop_repeated_shapes(run *r)
{
    int n = 0;
    for (int i = 0; i < r->nshapes; i++) {
        int first = -1;
        for (int k = 0; k < n && first < 0; k++)
            if (r->shapes[k].N == r->shapes[i].N && r->shapes[k].K == r->shapes[i].K)
                first = k;
        if (first < 0)
            r->shapes[n++] = r->shapes[i];
        else
            printf("(%ld, %ld), %s, is the shape of %s too: tuned once\n", r->shapes[i].N, r->shapes[i].K,
                   r->shapes[i].label, r->shapes[first].label);
    }
    r->nshapes = n;
}

static int setup_shapes(run *r, bt_err *err)
{
    const bt_options *o = r->o;
    if (o->N > 0) {
        r->shapes = bt_xcalloc(1, sizeof *r->shapes);
        r->shapes[0].N = o->N, r->shapes[0].K = o->K;
        snprintf(r->shapes[0].label, sizeof r->shapes[0].label, "--N/--K");
        r->nshapes = 1;
        return bt_shape_check(&r->shapes[0], err) ? bt_wrap(err, "--N/--K") : 0;
    }
    if (o->model) {
        char *why = NULL;
        if (bt_shapes_from_model(o->model, o->tp, &r->shapes, &r->nshapes, &why, err))
            return -1;
        printf("Shapes of %s at tp=%d:\n%s\n", o->model, o->tp, why);
        free(why);
        drop_repeated_shapes(r);
        return 0;
    }
    if (bt_shapes_deepseek_v3(o->tp, &r->shapes, &r->nshapes, err))
        return -1;
    drop_repeated_shapes(r);
    return 0;
}

/* --devices: every GPU listed exists and is the first one's model, which the configs are named
 * for. */
static int check_devices(const run *r, const bt_cuda *cu, bt_err *err)
{
    for (int i = 1; i < r->o->ndevices; i++) {
        bt_device_info d;
        bt_err derr = {{0}};
        if (bt_cuda_device_info(cu, r->o->devices[i], &d, &derr))
            return bt_fail(err, "--devices: %s", derr.msg);
        if (strcmp(d.name, r->dev.name) != 0 || d.cc_major != r->dev.cc_major || d.cc_minor != r->dev.cc_minor)
            return bt_fail(err, "--devices: device %d (%s) is not the model of device %d (%s): configs are named "
                           "for one model, so tune each in a run of its own", r->o->devices[i], d.name,
                           r->o->device, r->dev.name);
    }
    return 0;
}

/* The target comes from --arch or the device; without a driver only --dry-run --arch works. */
static int setup_target(run *r, bt_err *err)
{
    const bt_options *o = r->o;
    bt_cuda cu;
    bt_err derr = {{0}};
    int have = bt_cuda_open(&cu, &derr) == 0;
    if (have) {
        if (bt_cuda_device_info(&cu, o->device, &r->dev, &derr) == 0)
            r->have_device = 1;
        int bad = r->have_device && check_devices(r, &cu, err);
        bt_cuda_close(&cu);
        if (bad)
            return -1;
    }
    if (o->arch) {
        if (bt_target_from_arch(o->arch, &r->target))
            return bt_fail(err, "--arch: unknown architecture '%s'", o->arch);
        if (!o->dry_run) {
            if (!r->have_device)
                return bt_fail(err, "%s (tuning needs a GPU; --dry-run --arch %s compiles without one)",
                               derr.msg, o->arch);
            bt_target dt;
            if (bt_target_from_device(&r->dev, &dt, err))
                return -1;
            if (strcmp(dt.arch, r->target.arch) != 0)
                return bt_fail(err, "--arch %s does not match device %d (%s, %s)", o->arch, o->device,
                               r->dev.name, dt.arch);
            r->target = dt;
        }
        return 0;
    }
    if (!r->have_device)
        return bt_fail(err, "%s (pass --dry-run --arch sm_90a to compile without a GPU)", derr.msg);
    return bt_target_from_device(&r->dev, &r->target, err);
}

/* NVRTC's first compile in a process sets SIGINT and SIGTERM to SIG_IGN and then to a handler
 * of its own for a moment, and handlers are process-wide: a Ctrl-C that lands then is NVRTC's,
 * and the process exits with status 4, nothing said. So while the candidates compile both
 * signals are blocked in every thread (the compile threads inherit this thread's mask) and
 * taken here whenever the pool reports, before its first job and every 50 ms, which leaves a
 * pending one little time to be discarded by that SIG_IGN; they are raised again for main's
 * handler once the compiles have stopped. */
static void take_stop_signal(run *r)
{
    const struct timespec now = {0, 0};
    int sig = sigtimedwait(&r->stop_sigs, NULL, &now);
    if (sig > 0)
        r->caught = sig;
}

/* Shows the compiles' progress, and stops them at Ctrl-C. */
static int jit_progress(void *ud, size_t done, size_t total)
{
    run *r = ud;
    take_stop_signal(r);
    bt_progress_update(r->prog, (double)done, (long)done, (long)total);
    return *r->stop != 0 || r->caught;
}

static long find_cand(const run *r, const bt_cand *c)
{
    for (size_t i = 0; i < r->ncands; i++)
        if (memcmp(&r->cands[i].cand, c, sizeof *c) == 0)
            return (long)i;
    return -1;
}

/* Enumerates, rejects what the target cannot run (counting reasons), adds the runtime default
 * config, and compiles everything through the cache. Returns -1 for what the space or the flags
 * ask (nothing runnable), -2 when the compile cache fails; candidates that fail to compile are
 * noted and skipped. */
static int prepare_candidates(run *r, bt_err *err)
{
    bt_cand *all = NULL;
    size_t n = 0;
    char first_why[256] = "";
    if (bt_space_enumerate(&r->space, r->variant.block_n, r->variant.block_k, &all, &n, err))
        return -1;
    r->ncands_total = n;
    r->cands = bt_xcalloc(n + 1, sizeof *r->cands);
    for (size_t i = 0; i < n; i++) {
        bt_reject why = r->fam->check(&all[i], &r->variant, &r->target, first_why[0] ? NULL : first_why,
                                      sizeof first_why);
        r->rejected[why]++;
        if (why == BT_REJ_NONE)
            r->cands[r->ncands++].cand = all[i];
    }
    free(all);
    r->nspace = r->ncands;
    if (r->nspace == 0 && !r->o->dry_run)
        return bt_fail(err, "%s: none of the %zu candidates can run on %s (the first: %s; --dry-run counts the "
                       "rejections)",
                       r->space_path, n, r->target.arch, first_why);
    /* The runtime's default config for every (shape, M) is measured too, for the speedup the
     * config file buys (and competes): those the space lacks are compiled as well, where they
     * can run. */
    for (int s = 0; s < r->nshapes; s++)
        for (int b = 0; b < r->nbatch; b++) {
            bt_cand def;
            r->fam->fallback(r->batch[b], r->shapes[s].N, r->shapes[s].K, &r->variant, &r->target, &def);
            if (r->fam->check(&def, &r->variant, &r->target, NULL, 0) != BT_REJ_NONE)
                continue;
            if (find_cand(r, &def) < 0) {
                r->cands = bt_xrealloc(r->cands, sizeof *r->cands * (r->ncands + 1));
                memset(&r->cands[r->ncands], 0, sizeof r->cands[0]);
                r->cands[r->ncands++].cand = def;
            }
        }

    size_t nc = r->ncands;
    bt_jit_job *jobs = bt_xcalloc(nc, sizeof *jobs);
    for (size_t i = 0; i < nc; i++) {
        char extra[128] = "";
        if ((long)i == r->o->inject_fault)
            snprintf(extra, sizeof extra, "#define BT_TEST_FAULT 1\n");
        if ((long)i == r->o->inject_hang)
            snprintf(extra, sizeof extra, "#define BT_TEST_HANG 1\n");
        r->cands[i].source = bt_jit_source(r->fam, &r->cands[i].cand, &r->variant, extra[0] ? extra : NULL);
        jobs[i].name = "candidate";
        jobs[i].source = r->cands[i].source;
    }
    /* a unit per kernel: the ETA of the compiles (a full space takes minutes on a few cores) */
    r->prog = bt_progress_new(stderr, -1, r->o->quiet, (double)nc);
    bt_progress_stage(r->prog, "compiling", r->target.arch);
    double t0 = bt_now();
    int rc = 0;
    sigset_t mask;
    sigemptyset(&r->stop_sigs);
    sigaddset(&r->stop_sigs, SIGINT);
    sigaddset(&r->stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &r->stop_sigs, &mask);
    r->caught = 0;
    if (bt_jit_run(r->jit, jobs, nc, r->o->jobs, jit_progress, r, err)) {
        bt_wrap(err, "compile cache");
        rc = -2;
    }
    take_stop_signal(r);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    if (r->caught)
        raise(r->caught);
    r->compile_s = bt_now() - t0;
    for (size_t i = 0; i < nc; i++) {
        r->cands[i].job = jobs[i];
        if (jobs[i].status == BT_JIT_CACHED)
            r->cached++;
        else if (jobs[i].status == BT_JIT_COMPILED)
            r->compiled_now++;
        else if (jobs[i].status == BT_JIT_FAILED && !rc) { /* (a failed cache fails them all: err says why) */
            char desc[256];
            r->failed++;
            bt_cand_format(r->fam, &r->cands[i].cand, desc, sizeof desc);
            const char *log = jobs[i].log ? jobs[i].log : "";
            bt_progress_note(r->prog, "compile failed, skipped: %s: %.400s", desc, log);
        }
    }
    free(jobs);
    return rc;
}

static void print_dry_table(run *r)
{
    printf("\n%s family, %s -> %s, block [%d, %d], target %s (opt-in shared memory %ld bytes)\n",
           r->fam->name, bt_in_name(r->variant.in), bt_out_name(r->variant.out), r->variant.block_n,
           r->variant.block_k, r->target.arch, r->target.smem_optin);
    printf("search space %s (%s): %zu candidates x %d batch sizes\n", r->space_path, r->space.name,
           r->ncands_total, r->nbatch);
    printf("%-28s %6s %10s %10s %10s %10s %9s %8s %7s %7s\n", "shape (N, K)", "cands", "rej:smem",
           "rej:regs", "rej:shape", "rej:arch", "runnable", "compiled", "cached", "failed");
    size_t runnable = r->nspace;
    for (int s = 0; s < r->nshapes; s++) {
        char shape[64];
        snprintf(shape, sizeof shape, "(%ld, %ld)", r->shapes[s].N, r->shapes[s].K);
        /* Kernels take N, K and M at run time: one compilation serves every shape. */
        printf("%-28s %6zu %10zu %10zu %10zu %10zu %9zu %8zu %7zu %7zu\n", shape, r->ncands_total,
               r->rejected[BT_REJ_SMEM], r->rejected[BT_REJ_REGS], r->rejected[BT_REJ_SHAPE],
               r->rejected[BT_REJ_ARCH], runnable, s == 0 ? r->compiled_now : 0,
               s == 0 ? r->cached : r->cached + r->compiled_now, r->failed);
    }
    printf("(kernels take M, N and K at run time, so one compilation serves every shape; %zu default "
           "config(s) of the runtime not in the space are compiled too)\n", r->ncands - r->nspace);
    printf("compiled %zu, cached %zu, failed %zu in %.1f s\n", r->compiled_now, r->cached, r->failed,
           r->compile_s);
}

/* ---------------- measuring one shape ---------------- */

typedef struct {
    size_t cand;
    double us, rel_err;
    int pruned;  /* timed by one replay only */
    int retimed; /* a finalist: its time is the median of the interleaved re-timing */
} timed;

typedef struct {
    int done;        /* every candidate measured for this M */
    timed *all;      /* every verified candidate with its time (for --top) */
    size_t nall;
    long best;       /* index into cands, -1 when none passed */
    double best_us, default_us, best_err;
    int ok, wrong, failed, pruned;
} batch_result;

static double flops(long M, long N, long K) { return 2.0 * M * N * K; }

static double bytes(const run *r, long M, long N, long K)
{
    long ksc = (K + r->variant.block_k - 1) / r->variant.block_k;
    long nsc = (N + r->variant.block_n - 1) / r->variant.block_n;
    return (double)M * K + (double)N * K + 4.0 * (M * ksc + nsc * ksc) + (double)M * N * bt_out_size(r->variant.out);
}

typedef struct {
    bt_worker *w;
    char problem[256];
    char exe[4096];
} worker_ctl;

/* Sends the current problem to the running worker; a worker that fails to set it up has exited
 * or may be in any state, so it is stopped, and the next call starts a fresh one. */
static int set_problem(run *r, worker_ctl *wc, bt_err *err)
{
    char reply[2048];
    bt_worker_status st = bt_worker_call(wc->w, wc->problem, reply, sizeof reply, 10 * r->o->timeout_s, err);
    if (st != BT_WORKER_OK || strncmp(reply, "ok", 2) != 0) {
        if (st == BT_WORKER_OK)
            bt_fail(err, "setting up the problem on the GPU: %s", reply + (strncmp(reply, "error ", 6) ? 0 : 6));
        bt_worker_stop(wc->w);
        wc->w = NULL;
        return -1;
    }
    return 0;
}

static int worker_up(run *r, worker_ctl *wc, bt_err *err)
{
    if (wc->w)
        return 0;
    if (bt_worker_start(&wc->w, wc->exe, r->device, r->o->cache_dir, err))
        return -1;
    return wc->problem[0] ? set_problem(r, wc, err) : 0;
}

/* Verifies and times candidate i at the current problem; fills res. */
static void measure(run *r, worker_ctl *wc, size_t i, int is_default, long M, double prune_us, bt_result *res)
{
    bt_err err = {{0}};
    char vals[128], req[8192], reply[2048];
    memset(res, 0, sizeof *res);
    res->M = M;
    res->cand = r->cands[i].cand;
    res->is_default = is_default;
    res->us = NAN, res->rel_err = NAN;
    if (r->cands[i].job.status == BT_JIT_FAILED) {
        res->status = BT_RES_COMPILE;
        snprintf(res->note, sizeof res->note, "NVRTC failed");
        return;
    }
    if (worker_up(r, wc, &err)) {
        res->status = BT_RES_LAUNCH;
        snprintf(res->note, sizeof res->note, "%.150s", err.msg);
        return;
    }
    bt_cand_csv(r->fam, &r->cands[i].cand, vals, sizeof vals);
    /* the cubin's path last: the rest of the line, spaces and all */
    snprintf(req, sizeof req, "run %s %s %.3f %s\n", r->fam->name, vals, prune_us, r->cands[i].job.path);
    bt_worker_status st = bt_worker_call(wc->w, req, reply, sizeof reply, r->o->timeout_s, &err);
    if (st == BT_WORKER_TIMEOUT || st == BT_WORKER_DIED || st == BT_WORKER_ERROR) {
        res->status = st == BT_WORKER_TIMEOUT ? BT_RES_TIMEOUT : BT_RES_FAULT;
        snprintf(res->note, sizeof res->note, "%.150s", err.msg);
        bt_worker_stop(wc->w);
        wc->w = NULL;
        return;
    }
    double a = NAN, b = NAN, c = NAN;
    unsigned long long nf = 0, gd = 0;
    if (sscanf(reply, "ok %lf %lf %lf", &a, &b, &c) == 3) {
        res->status = BT_RES_OK, res->us = a, res->rel_err = b;
    } else if (sscanf(reply, "pruned %lf %lf", &a, &b) == 2) {
        res->status = BT_RES_PRUNED, res->us = a, res->rel_err = b;
        snprintf(res->note, sizeof res->note, "over %.1fx the best, timed once", PRUNE_FACTOR);
    } else if (sscanf(reply, "wrong %lf %llu %llu", &a, &nf, &gd) == 3) {
        res->status = BT_RES_WRONG, res->rel_err = a;
        snprintf(res->note, sizeof res->note, "rel_err %.3g (tolerance %.0e), %llu unwritten/non-finite, %llu guard bytes",
                 a, bt_tolerance(r->variant.out), nf, gd);
    } else if (strncmp(reply, "fault ", 6) == 0) {
        res->status = BT_RES_FAULT;
        snprintf(res->note, sizeof res->note, "%.150s", reply + 6);
        bt_worker_stop(wc->w); /* it exits after a fault; reap it */
        wc->w = NULL;
    } else {
        res->status = BT_RES_LAUNCH;
        snprintf(res->note, sizeof res->note, "%.150s", strncmp(reply, "launch ", 7) == 0 ? reply + 7 : reply);
    }
}

static void account(batch_result *b, const bt_result *res, size_t i)
{
    /* The runtime's default competes too: it is a valid config, and a file should never be
     * slower than having none. */
    if (res->is_default && res->status == BT_RES_OK)
        b->default_us = res->us;
    if (res->status == BT_RES_OK || res->status == BT_RES_PRUNED) {
        int pruned = res->status == BT_RES_PRUNED;
        if (pruned)
            b->pruned++;
        else
            b->ok++;
        if (!pruned && (b->best < 0 || res->us < b->best_us))
            b->best = (long)i, b->best_us = res->us, b->best_err = res->rel_err;
        b->all = bt_xrealloc(b->all, sizeof *b->all * (b->nall + 1));
        b->all[b->nall++] = (timed){i, res->us, res->rel_err, pruned, 0};
    } else if (res->status == BT_RES_WRONG) {
        b->wrong++;
    } else {
        b->failed++;
    }
}

static void print_summary(run *r, const bt_shape *s, const batch_result *br)
{
    long N = s->N, K = s->K;
    char on[32] = ""; /* which GPU, where several share the run */
    if (r->slot)
        snprintf(on, sizeof on, ", device %d", r->device);
    printf("\nN=%ld K=%ld %s -> %s on %s (%s%s), %s family\n", N, K, bt_in_name(r->variant.in),
           bt_out_name(r->variant.out), r->dev.name, r->target.arch, on, r->fam->name);
    printf("%7s  %-34s %9s %8s %8s %11s %8s  %s\n", "M", "best config", "time us", "TFLOPS", "GB/s",
           "default us", "speedup", "ok/pruned/wrong/failed");
    for (int b = 0; b < r->nbatch; b++) {
        long M = r->batch[b];
        const batch_result *x = &br[b];
        char desc[128] = "-";
        if (x->best >= 0)
            bt_cand_csv(r->fam, &r->cands[x->best].cand, desc, sizeof desc);
        double us = x->best_us;
        char spd[16] = "-", def[16] = "-";
        if (x->default_us > 0) {
            snprintf(def, sizeof def, "%.2f", x->default_us);
            if (x->best >= 0)
                snprintf(spd, sizeof spd, "%.2fx", x->default_us / us);
        }
        if (x->best >= 0)
            printf("%7ld  %-34s %9.2f %8.1f %8.0f %11s %8s  %d/%d/%d/%d%s\n", M, desc, us,
                   flops(M, N, K) / us * 1e-6, bytes(r, M, N, K) / us * 1e-3, def, spd, x->ok, x->pruned,
                   x->wrong, x->failed, x->done ? "" : " (unfinished)");
        else
            printf("%7ld  %-34s %9s %8s %8s %11s %8s  %d/%d/%d/%d%s\n", M, "no verified candidate", "-", "-",
                   "-", def, spd, x->ok, x->pruned, x->wrong, x->failed, x->done ? "" : " (unfinished)");
    }
}

static int cmp_timed(const void *a, const void *b)
{
    double x = ((const timed *)a)->us, y = ((const timed *)b)->us;
    return (x > y) - (x < y);
}

/* --top: the fastest candidates of each batch size. */
static void print_top(run *r, const batch_result *br)
{
    for (int b = 0; b < r->nbatch; b++) {
        if (br[b].nall > 0) /* (else all is NULL) */
            qsort(br[b].all, br[b].nall, sizeof *br[b].all, cmp_timed);
        printf("  M=%ld, fastest %d of %zu verified (finalists re-timed; the others' times are from the "
               "first pass, seconds apart):\n",
               r->batch[b], r->o->top < (int)br[b].nall ? r->o->top : (int)br[b].nall, br[b].nall);
        for (size_t k = 0; k < br[b].nall && (int)k < r->o->top; k++) {
            char desc[128];
            const timed *x = &br[b].all[k];
            bt_cand_csv(r->fam, &r->cands[x->cand].cand, desc, sizeof desc);
            char ratio[32] = "";
            if (br[b].best >= 0) /* none when every finalist was skipped and only pruned ones are left */
                snprintf(ratio, sizeof ratio, "  %.3fx the best", x->us / br[b].best_us);
            printf("    %-34s %9.2f us%s%s\n", desc, x->us, ratio,
                   x->pruned ? "  (one replay: pruned)" : x->retimed ? "  (finalist)" : "");
        }
    }
}

/* The finalists of a batch size as timed again, fastest (the pick) first: the candidates a
 * kernel other than the port (SGLang's Triton one) may rank otherwise, for bench/ to time there.
 * NULL when none was timed again (fewer than two verified, or every finalist skipped). */
static cJSON *finalists_json(run *r, const batch_result *b)
{
    timed fin[BT_FINALISTS + 1 + BT_FINALIST_KEYS];
    size_t n = 0;
    for (size_t k = 0; k < b->nall && n < sizeof fin / sizeof fin[0]; k++)
        if (b->all[k].retimed)
            fin[n++] = b->all[k];
    if (n == 0)
        return NULL;
    qsort(fin, n, sizeof *fin, cmp_timed);
    for (size_t k = 1; k < n; k++) /* the pick first, also where another took the same time */
        if ((long)fin[k].cand == b->best) {
            timed t = fin[k];
            memmove(fin + 1, fin, k * sizeof *fin);
            fin[0] = t;
        }
    cJSON *arr = cJSON_CreateArray();
    for (size_t k = 0; k < n; k++) {
        char vals[128];
        cJSON *f = cJSON_CreateObject();
        bt_cand_csv(r->fam, &r->cands[fin[k].cand].cand, vals, sizeof vals);
        cJSON_AddStringToObject(f, "config", vals);
        cJSON_AddNumberToObject(f, "us", round(fin[k].us * 1000) / 1000);
        cJSON_AddItemToArray(arr, f);
    }
    return arr;
}

static void iso_date(char *buf, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Appends this run to the provenance sidecar (never into the config itself). */
static int write_provenance(run *r, const char *config_path, const bt_shape *s, const batch_result *br,
                            double measure_s, bt_err *err)
{
    char date[64];
    cJSON *run_o = cJSON_CreateObject();
    iso_date(date, sizeof date);
    cJSON_AddStringToObject(run_o, "tool", "blocktune " BT_VERSION);
    cJSON_AddStringToObject(run_o, "date", date);
    cJSON_AddStringToObject(run_o, "device", r->dev.name);
    cJSON_AddNumberToObject(run_o, "driver_version", r->dev.driver_version);
    cJSON_AddStringToObject(run_o, "arch", r->target.arch);
    cJSON_AddStringToObject(run_o, "nvrtc", bt_jit_nvrtc_version());
    cJSON_AddStringToObject(run_o, "family", r->fam->name);
    cJSON_AddNumberToObject(run_o, "N", (double)s->N);
    cJSON_AddNumberToObject(run_o, "K", (double)s->K);
    cJSON_AddStringToObject(run_o, "input_type", bt_in_name(r->variant.in));
    cJSON_AddStringToObject(run_o, "out_dtype", bt_out_name(r->variant.out));
    cJSON_AddStringToObject(run_o, "search_space", r->space_path);
    char digest[65];
    bt_space_digest(&r->space, digest);
    cJSON_AddStringToObject(run_o, "search_space_digest", digest);
    cJSON_AddNumberToObject(run_o, "candidates", (double)r->ncands_total);
    cJSON_AddNumberToObject(run_o, "runnable", (double)r->nspace);
    cJSON_AddStringToObject(run_o, "timing_method", bt_bench_method());
    cJSON_AddNumberToObject(run_o, "rest_ms", (double)r->o->rest_ms);
    if (r->o->pdl) /* the configs suit launches with blocktune_options.pdl */
        cJSON_AddStringToObject(run_o, "launch", "programmatic dependent launch");
    cJSON_AddNumberToObject(run_o, "compile_seconds", round(r->compile_s * 10) / 10);
    cJSON_AddNumberToObject(run_o, "measure_seconds", round(measure_s * 10) / 10);
    cJSON *res = cJSON_AddObjectToObject(run_o, "results");
    for (int b = 0; b < r->nbatch; b++) {
        if (!br[b].done || br[b].best < 0)
            continue;
        long M = r->batch[b];
        char key[32], vals[128];
        snprintf(key, sizeof key, "%ld", M);
        cJSON *e = cJSON_AddObjectToObject(res, key);
        bt_cand_csv(r->fam, &r->cands[br[b].best].cand, vals, sizeof vals);
        cJSON_AddStringToObject(e, "config", vals);
        cJSON_AddNumberToObject(e, "us", round(br[b].best_us * 1000) / 1000);
        cJSON_AddNumberToObject(e, "tflops", round(flops(M, s->N, s->K) / br[b].best_us * 1e-3) / 1e3);
        cJSON_AddNumberToObject(e, "gbps", round(bytes(r, M, s->N, s->K) / br[b].best_us * 1e-3));
        cJSON_AddNumberToObject(e, "rel_err", br[b].best_err);
        if (br[b].default_us > 0) {
            cJSON_AddNumberToObject(e, "default_us", round(br[b].default_us * 1000) / 1000);
            cJSON_AddNumberToObject(e, "speedup", round(br[b].default_us / br[b].best_us * 1000) / 1000);
        }
        cJSON_AddNumberToObject(e, "verified", br[b].ok + br[b].pruned);
        cJSON_AddNumberToObject(e, "wrong", br[b].wrong);
        cJSON_AddNumberToObject(e, "failed", br[b].failed);
        cJSON *fin = finalists_json(r, &br[b]);
        if (fin)
            cJSON_AddItemToObject(e, "finalists", fin);
    }
    return bt_sidecar_append(config_path, run_o, err);
}

/* Writes the config for the batch sizes finished so far (merging into an existing file), and
 * fills moves with the batch sizes of SGLang's that the merge moves onto a new entry: a serving
 * stack calling with them runs a config nobody timed at that M. */
static int write_config(run *r, const char *path, const batch_result *br, bt_config_move *moves, int *nmoves,
                        bt_err *err)
{
    bt_config c = {0}, before = {0};
    int rc = -1;
    for (int b = 0; b < r->nbatch; b++)
        if (br[b].done && br[b].best >= 0)
            bt_config_set(&c, r->batch[b], &r->cands[br[b].best].cand);
    if (bt_config_merge_write(path, r->fam, &c, &before, err))
        goto out;
    *nmoves = bt_config_moves(&before, &c, moves);
    rc = 0;
out:
    bt_config_free(&before);
    bt_config_free(&c);
    return rc;
}

static unsigned long long seed_for(long N, long K, long M)
{
    unsigned long long x = (unsigned long long)time(NULL) * 0x9e3779b97f4a7c15ull;
    x ^= (unsigned long long)N * 0xbf58476d1ce4e5b9ull + (unsigned long long)K * 0x94d049bb133111ebull + (unsigned long long)M;
    return x & 0x7fffffffffffffffull;
}

static int find_prior(const bt_result *prior, size_t nprior, long M, const bt_cand *c, int is_default)
{
    for (size_t i = 0; i < nprior; i++)
        if (prior[i].M == M && prior[i].is_default == is_default && memcmp(&prior[i].cand, c, sizeof *c) == 0)
            return (int)i;
    return -1;
}

/* The GPU's clock drifts over a run (power and temperature), so candidates timed seconds apart
 * are not compared on equal terms. The default and the BT_FINALISTS fastest (with the fastest
 * unpruned one of each value of the family's finalist_key) are timed again in
 * BT_FINAL_ROUNDS interleaved rounds, each time after the GPU has idled for --rest milliseconds,
 * and each one's median stands for it: times of a GPU at the clock it runs between bursts, as a
 * side-by-side benchmark sees it, and not at the lower one a minutes-long tune holds it at (8-10%
 * slower on large GEMMs). A finalist that fails every re-timing keeps its first time; one that
 * is wrong, faults or hangs in a re-timing (a race shows only sometimes) is skipped, as in the
 * first pass. */
static void retime(run *r, worker_ctl *wc, batch_result *b, size_t ndef, long M)
{
    enum { NFIN = BT_FINALISTS + 1 + BT_FINALIST_KEYS };
    timed *fin[NFIN];
    int nfin = 0, has_def = 0, bad[NFIN] = {0};
    double t[NFIN][BT_FINAL_ROUNDS], rel[NFIN];
    if (b->nall == 0) /* (nothing verified: b->all is NULL) */
        return;
    qsort(b->all, b->nall, sizeof *b->all, cmp_timed);
    for (size_t k = 0; k < b->nall; k++) {
        timed *x = &b->all[k];
        if (!x->pruned && (nfin < BT_FINALISTS || (x->cand == ndef && !has_def))) {
            fin[nfin++] = x;
            has_def |= x->cand == ndef;
        }
    }
    /* and the fastest of each value of the family's finalist key (the default, a finalist
     * however slow, stands for its value only where it is that value's fastest) */
    const int key = r->fam->finalist_key ? bt_family_param_index(r->fam, r->fam->finalist_key) : -1;
    int done[NFIN], ndone = 0;
    for (int f = 0; key >= 0 && f < nfin; f++)
        if (fin[f]->cand != ndef)
            done[ndone++] = r->cands[fin[f]->cand].cand.v[key];
    for (size_t k = 0; key >= 0 && k < b->nall && nfin < NFIN && ndone < NFIN; k++) {
        timed *x = &b->all[k];
        const int v = r->cands[x->cand].cand.v[key];
        int seen = x->pruned;
        for (int d = 0; d < ndone && !seen; d++)
            seen = done[d] == v;
        if (seen)
            continue;
        done[ndone++] = v;
        if (x->cand != ndef)
            fin[nfin++] = x;
    }
    if (nfin < 2)
        return;
    const long rest = r->o->rest_ms;
    for (int round = 0; round < BT_FINAL_ROUNDS; round++)
        for (int f = 0; f < nfin; f++) {
            if (rest > 0) { /* an idle GPU is back at its full clock within 100 ms */
                struct timespec ts = {rest / 1000, rest % 1000 * 1000000L};
                nanosleep(&ts, NULL);
            }
            int x = (f + round) % nfin; /* each round starts with a different finalist */
            bt_result res;
            t[x][round] = NAN;
            if (bad[x])
                continue;
            measure(r, wc, fin[x]->cand, fin[x]->cand == ndef, M, 0, &res);
            t[x][round] = res.status == BT_RES_OK ? res.us : NAN;
            if (res.status == BT_RES_OK)
                rel[x] = res.rel_err;
            if (res.status == BT_RES_WRONG || res.status == BT_RES_FAULT || res.status == BT_RES_TIMEOUT) {
                char desc[256];
                bad[x] = res.status;
                bt_cand_format(r->fam, &res.cand, desc, sizeof desc);
                bt_progress_note(r->prog, "M=%ld %s: %s when timed again, skipped (%s)", M, desc,
                                 bt_res_name(res.status), res.note);
            }
        }
    b->best = -1, b->best_us = 0;
    for (int f = 0; f < nfin; f++) {
        double v[BT_FINAL_ROUNDS];
        if (bad[f]) {
            b->ok--;
            if (bad[f] == BT_RES_WRONG)
                b->wrong++;
            else
                b->failed++;
            if (fin[f]->cand == ndef)
                b->default_us = 0;
            continue;
        }
        int n = 0;
        for (int round = 0; round < BT_FINAL_ROUNDS; round++)
            if (!isnan(t[f][round]))
                v[n++] = t[f][round];
        if (n > 0)
            fin[f]->us = bt_median(v, n), fin[f]->rel_err = rel[f], fin[f]->retimed = 1;
        if (fin[f]->cand == ndef)
            b->default_us = fin[f]->us;
        if (b->best < 0 || fin[f]->us < b->best_us)
            b->best = (long)fin[f]->cand, b->best_us = fin[f]->us, b->best_err = fin[f]->rel_err;
    }
    /* The skipped leave the verified; with every finalist skipped, the fastest other stands. */
    size_t keep = 0;
    for (size_t k = 0; k < b->nall; k++) {
        int drop = 0;
        for (int f = 0; f < nfin; f++)
            drop |= bad[f] && fin[f] == &b->all[k];
        if (!drop)
            b->all[keep++] = b->all[k];
    }
    b->nall = keep;
    for (size_t k = 0; k < b->nall && b->best < 0; k++)
        if (!b->all[k].pruned)
            b->best = (long)b->all[k].cand, b->best_us = b->all[k].us, b->best_err = b->all[k].rel_err;
}

/* A new problem (fresh random inputs and reference) for this M, in a running worker or a new one. */
static int send_problem(run *r, worker_ctl *wc, long M, bt_err *err)
{
    int rc = wc->w ? set_problem(r, wc, err) : worker_up(r, wc, err);
    return rc ? bt_wrap(err, "M=%ld", M) : 0; /* (the caller names N and K) */
}

/* Progress, on this process's line and, in a GPU process of a run on several, for the parent's. */
static void progress_units(run *r, double units, long done, long total)
{
    bt_progress_update(r->prog, units, done, total);
    if (r->slot)
        atomic_store(&r->slot->units_milli, llround(units * 1000));
}

static void progress_skip(run *r, double units)
{
    bt_progress_skip(r->prog, units);
    if (r->slot)
        atomic_fetch_add(&r->slot->skipped_milli, llround(units * 1000));
}

static int tune_shape(run *r, int si, worker_ctl *wc, double *units, bt_err *err)
{
    const bt_shape *s = &r->shapes[si];
    char name[1024], path[4200], jpath[4300];
    int rc = -1;
    bt_journal *j = NULL;
    bt_result *prior = NULL;
    size_t nprior = 0;
    batch_result *br = bt_xcalloc((size_t)r->nbatch, sizeof *br);
    double t0 = bt_now(), units0 = *units, resumed = 0;
    for (int b = 0; b < r->nbatch; b++)
        br[b].best = -1; /* (an interrupted run's summary lists the batch sizes not started too) */
    if (bt_config_filename(name, sizeof name, r->fam, s->N, s->K, r->dev.name, r->variant.in,
                           r->variant.block_n, r->variant.block_k, r->o->format) ||
        bt_sprintf(path, sizeof path, "%s/%s", r->o->out_dir, name) ||
        bt_sprintf(jpath, sizeof jpath, "%s.journal", path)) {
        bt_fail(err, "--out-dir: path too long");
        goto out;
    }
    /* A config or sidecar there that the run could not merge into is found before it measures. */
    if (bt_outputs_check(path, r->fam, err)) {
        bt_append(err, "; nothing measured");
        goto out;
    }
    bt_journal_header h = {0};
    snprintf(h.device, sizeof h.device, "%s", r->dev.name);
    snprintf(h.family, sizeof h.family, "%s", r->fam->name);
    h.N = s->N, h.K = s->K;
    snprintf(h.in, sizeof h.in, "%s", bt_in_name(r->variant.in));
    snprintf(h.out, sizeof h.out, "%s", bt_out_name(r->variant.out));
    h.block_n = r->variant.block_n, h.block_k = r->variant.block_k;
    snprintf(h.arch, sizeof h.arch, "%s", r->target.arch);
    bt_space_digest(&r->space, h.space_digest);
    snprintf(h.launch, sizeof h.launch, "%s", r->o->pdl ? "programmatic" : "stream");
    const int over = !r->o->resume && file_exists(jpath);
    if (bt_journal_open(jpath, &h, r->o->resume, &j, &prior, &nprior, r->fam, err))
        goto out;
    if (over)
        bt_progress_note(r->prog, "starting over: %s held an interrupted run of this shape, which --resume would "
                                  "have continued", jpath);
    if (nprior)
        bt_progress_note(r->prog, "resuming %s: %zu results from the journal", name, nprior);

    /* setup_failed: a batch size's problem could not be set up (say, its buffers do not fit
     * the GPU): those before it are written, and the shape fails. */
    int interrupted = 0, setup_failed = 0;
    for (int b = 0; b < r->nbatch && !interrupted && !setup_failed; b++) {
        long M = r->batch[b];
        char what[96], sub[64];
        snprintf(what, sizeof what, "N=%ld K=%ld %d/%d", s->N, s->K, si + 1, r->nshapes);
        snprintf(sub, sizeof sub, "M=%ld (%d/%d)", M, b + 1, r->nbatch);
        bt_progress_stage(r->prog, what, sub);
        br[b].best = -1;
        snprintf(wc->problem, sizeof wc->problem, "problem %ld %ld %ld %s %s %d %d %llu %d\n", M, s->N, s->K,
                 bt_in_name(r->variant.in), bt_out_name(r->variant.out), r->variant.block_n,
                 r->variant.block_k, seed_for(s->N, s->K, M), r->o->pdl);
        int problem_sent = 0;
        /* The default first: a baseline for pruning, and the speedup the config buys. One that
         * cannot run on the target was not compiled (prepare_candidates): there is none. */
        bt_cand def;
        r->fam->fallback(M, s->N, s->K, &r->variant, &r->target, &def);
        const long d = find_cand(r, &def);
        const size_t ndef = d < 0 ? SIZE_MAX : (size_t)d;
        if (d < 0 || ndef < r->nspace)
            *units += 1; /* its share of the run's total: none, or the space's own, measured first */
        for (size_t k = d < 0 ? 1 : 0; k <= r->nspace; k++) {
            size_t i = k == 0 ? ndef : k - 1;
            if (k > 0 && i == ndef)
                continue;
            if (*r->stop) {
                interrupted = 1;
                break;
            }
            bt_result res;
            int pi = find_prior(prior, nprior, M, &r->cands[i].cand, k == 0);
            if (pi >= 0) {
                res = prior[pi];
                progress_skip(r, 1); /* measured by the run that journaled it */
                resumed++;
            } else {
                if (!problem_sent) {
                    if (send_problem(r, wc, M, err)) {
                        setup_failed = 1;
                        break;
                    }
                    problem_sent = 1;
                }
                double prune = br[b].best >= 0 ? PRUNE_FACTOR * br[b].best_us : 0;
                measure(r, wc, i, k == 0, M, prune, &res);
                if (bt_journal_append(j, &res, err))
                    goto out;
                if (res.status != BT_RES_OK && res.status != BT_RES_PRUNED && res.status != BT_RES_COMPILE) {
                    char desc[256];
                    bt_cand_format(r->fam, &res.cand, desc, sizeof desc);
                    bt_progress_note(r->prog, "M=%ld %s: %s, skipped (%s)", M, desc, bt_res_name(res.status),
                                     res.note);
                }
            }
            account(&br[b], &res, i);
            if (pi < 0)
                *units += 1;
            progress_units(r, *units, (long)k + 1, (long)r->nspace + 1);
        }
        if (!interrupted && !setup_failed) {
            if (!problem_sent && br[b].ok > 1 && send_problem(r, wc, M, err)) {
                setup_failed = 1;
                break;
            }
            retime(r, wc, &br[b], ndef, M);
            br[b].done = 1;
        }
    }
    double measure_s = bt_now() - t0;
    bt_progress_clear(r->prog); /* the summary follows; the next shape's stage redraws the line */
    print_summary(r, s, br);
    if (r->o->top > 0)
        print_top(r, br);
    int any = 0;
    for (int b = 0; b < r->nbatch; b++)
        any |= br[b].done && br[b].best >= 0;
    bt_config_move moves[BT_SGLANG_BATCHES];
    int nmoves = 0;
    if (any && (write_config(r, path, br, moves, &nmoves, err) || write_provenance(r, path, s, br, measure_s, err)))
        goto out;
    if (any)
        printf("wrote %s (%.0f s measuring)\n", path, measure_s);
    for (int i = 0; i < nmoves; i++)
        printf("  M=%ld, not tuned in this run, now takes the %ld entry instead of the %ld one\n", moves[i].M,
               moves[i].now, moves[i].was);
    if (setup_failed) { /* the journal stays, with what was measured */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        bt_fail(err, "%s; %s, the journal %s resumes the rest (--resume)", why,
                any ? "the batch sizes before it are written" : "nothing written", jpath);
        goto out;
    }
    if (!any && !interrupted) {
        /* Every candidate failed, faulted or was wrong: the shape failed. Its journal goes, so
         * that running again tries them all again. */
        bt_journal_close(j, 1);
        j = NULL;
        bt_fail(err, "no candidate was verified at any batch size; nothing written");
        goto out;
    }
    if (interrupted) {
        bt_journal_close(j, 0);
        j = NULL;
        printf("interrupted: %s; the journal %s resumes the rest (--resume)\n",
               any ? "finished batch sizes written" : "no batch size finished", jpath);
        rc = 1;
        goto out;
    }
    bt_journal_close(j, 1);
    j = NULL;
    rc = 0;
out:
    if (rc < 0) /* what a failed shape leaves undone is no longer ahead of the run */
        progress_skip(r, (double)r->nbatch * (r->nspace + 1) - (*units - units0) - resumed);
    /* A log or pipe gets the shape's table now, between the progress lines, not at exit. */
    fflush(stdout);
    if (j)
        bt_journal_close(j, 0);
    free(prior);
    for (int b = 0; b < r->nbatch; b++)
        free(br[b].all);
    free(br);
    return rc;
}

/* Why shape s failed, on a line of its own (a shape that failed left its progress line up). */
static void say_shape_failed(run *r, int s, const bt_err *why)
{
    bt_progress_clear(r->prog);
    fprintf(stderr, "tune: N=%ld K=%ld: %s\n", r->shapes[s].N, r->shapes[s].K, why->msg);
}

/* ---------------- several GPUs ---------------- */

typedef struct {
    run *r;
    const worker_ctl *wc;
} fan_arg;

/* In GPU process i: takes the next shape not taken until none is left, as the single-GPU loop
 * does them, on device i of --devices. Its lines go to the parent, which shows them. */
static int fan_child(int i, void *shared, void *arg)
{
    fan_arg *a = arg;
    run *r = a->r;
    fan_shared *sh = shared;
    worker_ctl wc = *a->wc;
    double units = 0;
    r->device = r->o->devices[i];
    r->slot = &sh->slot[i];
    bt_progress_free(r->prog); /* the parent draws the line */
    r->prog = bt_progress_new(stderr, 0, 1, (double)r->nshapes * r->nbatch * (r->nspace + 1));
    while (!*r->stop) {
        int s = atomic_fetch_add(&sh->next_shape, 1);
        if (s >= r->nshapes)
            break;
        bt_err serr = {{0}};
        atomic_store(&r->slot->shape, s + 1);
        int rc = tune_shape(r, s, &wc, &units, &serr);
        atomic_store(&r->slot->shape, 0);
        if (*r->stop)
            break;
        if (rc) {
            atomic_fetch_add(&sh->failed_shapes, 1);
            say_shape_failed(r, s, &serr);
        }
        atomic_fetch_add(&sh->done_shapes, 1);
    }
    bt_worker_stop(wc.w);
    return *r->stop ? BT_EXIT_INTERRUPTED : BT_EXIT_OK;
}

/* Shows a GPU process's line: its tables as they are, its notes on their own line, naming the
 * GPU. */
static void fan_line(void *ud, int i, int is_err, const char *line)
{
    run *r = ud;
    if (is_err) {
        bt_progress_note(r->prog, "[GPU %d] %s", r->o->devices[i], line);
        return;
    }
    bt_progress_clear(r->prog);
    printf("%s\n", line);
    fflush(stdout);
}

/* --devices: the shapes on every GPU listed at once, each GPU in a process of its own that
 * takes the next shape when it finishes one; this process shows their output and one progress
 * line for all, and passes a stop on (SIGUSR1: see tune.h) to those a signal did not reach. */
static int tune_on_devices(run *r, const worker_ctl *wc, bt_err *err)
{
    const int n = r->o->ndevices;
    fan_arg arg = {r, wc};
    bt_fanout *f = NULL;
    if (bt_fanout_start(&f, n, sizeof(fan_shared) + (size_t)n * sizeof(fan_slot), fan_child, &arg, err))
        return BT_EXIT_FAIL;
    fan_shared *sh = bt_fanout_shared(f);
    int passed_on = 0, shown = -1;
    long long skipped = 0;
    char what[64], sub[32];
    snprintf(sub, sizeof sub, "on %d GPUs", n);
    while (bt_fanout_poll(f, 200, fan_line, r) > 0) {
        if (*r->stop && !passed_on) {
            bt_fanout_signal(f, SIGUSR1); /* each finishes its candidate in flight, as one run does */
            passed_on = 1;
        }
        long long done = 0, skip = 0;
        for (int i = 0; i < n; i++)
            done += atomic_load(&sh->slot[i].units_milli), skip += atomic_load(&sh->slot[i].skipped_milli);
        if (skip > skipped)
            bt_progress_skip(r->prog, (double)(skip - skipped) / 1000);
        skipped = skip;
        const int finished = atomic_load(&sh->done_shapes);
        bt_progress_lanes(r->prog, n, r->nshapes - finished); /* (shapes under way or not started) */
        if (finished != shown) {
            snprintf(what, sizeof what, "%d/%d shapes done", finished, r->nshapes);
            bt_progress_stage(r->prog, what, sub);
            shown = finished;
        }
        bt_progress_update(r->prog, (double)done / 1000, 0, 0); /* (the stage counts the shapes) */
    }
    bt_progress_clear(r->prog);
    /* (a stop that came once every GPU had finished interrupted nothing) */
    int interrupted = 0, failed = atomic_load(&sh->failed_shapes), lost = 0;
    for (int i = 0; i < n; i++) {
        int st = bt_fanout_status(f, i), s = atomic_load(&sh->slot[i].shape) - 1;
        if (st == BT_EXIT_INTERRUPTED) {
            interrupted = 1;
        } else if (st != BT_EXIT_OK) {
            lost++;
            if (s >= 0) { /* its journal has what it measured */
                failed++;
                fprintf(stderr, "tune: the process of GPU %d ended with status %d while tuning N=%ld K=%ld (--resume "
                        "goes on from its journal)\n", r->o->devices[i], st, r->shapes[s].N, r->shapes[s].K);
            } else {
                fprintf(stderr, "tune: the process of GPU %d ended with status %d\n", r->o->devices[i], st);
            }
        }
    }
    bt_fanout_free(f);
    if (interrupted) {
        bt_fail(err, "interrupted");
        return BT_EXIT_INTERRUPTED;
    }
    if (failed || lost) {
        if (lost)
            bt_fail(err, "%d of %d shapes failed, and %d GPU process(es) ended early", failed, r->nshapes, lost);
        else
            bt_fail(err, "%d of %d shapes failed", failed, r->nshapes);
        return BT_EXIT_FAIL;
    }
    return BT_EXIT_OK;
}

/* ---------------- entry ---------------- */

static void free_run(run *r)
{
    for (size_t i = 0; i < r->ncands; i++) {
        bt_jit_job_clear(&r->cands[i].job);
        free(r->cands[i].source);
    }
    free(r->cands);
    free(r->shapes);
    bt_space_free(&r->space);
    bt_jit_close(r->jit);
    bt_progress_free(r->prog);
}

int bt_tune(const bt_options *o, volatile sig_atomic_t *stop, bt_err *err)
{
    run r;
    int code = BT_EXIT_USAGE;
    memset(&r, 0, sizeof r);
    r.o = o, r.stop = stop, r.device = o->device;
    r.variant = (bt_variant){o->in, o->out, o->block_n, o->block_k};
    if (!(r.fam = bt_family_find(o->family))) {
        bt_fail(err, "--family: unknown family '%s'", o->family);
        goto out;
    }
    if (resolve_space(&r, err) || bt_space_load(r.space_path, &r.space, err))
        goto out;
    if (r.space.family != r.fam) {
        bt_fail(err, "%s is a search space for the %s family; pass --family %s", r.space_path,
                r.space.family->name, r.space.family->name);
        goto out;
    }
    r.batch = o->batch ? o->batch : r.space.batch;
    r.nbatch = o->batch ? o->nbatch : r.space.nbatch;
    if (setup_shapes(&r, err))
        goto out;
    /* A directory that cannot be one is the command line's fault; what fails under it later
     * (the cache's arch subdirectory, a full disk) is the run's. Nothing is created before
     * the run has a target: a run without a GPU leaves no empty directories behind. */
    if (!o->dry_run && bt_check_dir_creatable(o->out_dir, err)) {
        bt_wrap(err, "--out-dir");
        goto out;
    }
    if (bt_check_dir_creatable(o->cache_dir, err)) {
        bt_wrap(err, "--cache-dir");
        goto out;
    }
    code = BT_EXIT_FAIL;
    if (setup_target(&r, err))
        goto out;
    if (!o->dry_run && bt_mkdirs(o->out_dir, err)) { /* checked writable above */
        bt_wrap(err, "--out-dir");
        goto out;
    }
    if (bt_jit_open(o->cache_dir, &r.target, BT_JIT_STORE_REQUIRED, &r.jit, err)) {
        bt_wrap(err, "--cache-dir");
        goto out;
    }
    int prep = prepare_candidates(&r, err);
    if (*stop) {
        code = BT_EXIT_INTERRUPTED;
        bt_fail(err, "interrupted while compiling (what compiled is cached)");
        goto out;
    }
    if (prep) {
        /* an empty space, a bad BLOCK_SIZE_K or nothing runnable on --arch is the input's fault */
        code = prep == -1 ? BT_EXIT_USAGE : BT_EXIT_FAIL;
        goto out;
    }
    bt_progress_free(r.prog);
    r.prog = NULL;
    if (o->dry_run) {
        print_dry_table(&r);
        code = r.failed ? BT_EXIT_FAIL : BT_EXIT_OK;
        if (r.nspace == 0) { /* the table says why; a real run would refuse the space */
            code = BT_EXIT_USAGE;
            bt_fail(err, "%s: none of the %zu candidates can run on %s", r.space_path, r.ncands_total, r.target.arch);
        } else if (r.failed) {
            bt_fail(err, "%zu candidates failed to compile", r.failed);
        }
        goto out;
    }
    char gpus[64] = "";
    if (o->ndevices > 1)
        snprintf(gpus, sizeof gpus, "%d x ", o->ndevices);
    printf("tuning %d shape(s) x %d batch sizes x %zu candidates (+ the default config) on %s%s (%s); "
           "compile %.1f s (%zu compiled, %zu cached, %zu failed)\n",
           r.nshapes, r.nbatch, r.nspace, gpus, r.dev.name, r.target.arch, r.compile_s, r.compiled_now,
           r.cached, r.failed);
    fflush(stdout);
    worker_ctl wc = {0};
    ssize_t n = readlink("/proc/self/exe", wc.exe, sizeof wc.exe - 1);
    if (n <= 0) {
        bt_fail(err, "cannot find this executable to start the GPU worker");
        goto out;
    }
    wc.exe[n] = '\0';
    double units = 0;
    r.prog = bt_progress_new(stderr, -1, o->quiet, (double)r.nshapes * r.nbatch * (r.nspace + 1));
    if (o->ndevices > 1) {
        code = tune_on_devices(&r, &wc, err);
        goto out;
    }
    int failed_shapes = 0;
    for (int s = 0; s < r.nshapes; s++) {
        bt_err serr = {{0}};
        int rc = tune_shape(&r, s, &wc, &units, &serr);
        if (*stop) {
            code = BT_EXIT_INTERRUPTED;
            bt_fail(err, "interrupted");
            break;
        }
        if (rc) {
            failed_shapes++;
            say_shape_failed(&r, s, &serr);
        }
    }
    bt_worker_stop(wc.w);
    if (code != BT_EXIT_INTERRUPTED) {
        code = failed_shapes ? BT_EXIT_FAIL : BT_EXIT_OK;
        if (failed_shapes)
            bt_fail(err, "%d of %d shapes failed", failed_shapes, r.nshapes);
    }
out:
    free_run(&r);
    return code;
}
