/* The library behind include/blocktune.h: config lookup, dispatch between the kernel families,
 * compile-on-first-use through the cache, and launches on the caller's stream. */
#include "blocktune.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "configio.h"
#include "family.h"
#include "gpu.h"
#include "jit.h"

typedef struct {
    const bt_family *fam;
    long N, K;
    bt_variant v;
    bt_config cfg; /* empty when no file exists */
    char name[1024];
    char unread[BT_ERRMAX]; /* why a file that exists could not be read, or "" */
} shape_cfg;

typedef struct {
    const bt_family *fam;
    bt_cand cand;
    bt_variant v;
    bt_kernel k;
    char *failed; /* why it failed to compile or load (k unused), or NULL */
} loaded;

struct blocktune {
    bt_gpu gpu;
    bt_jit *jit;
    char *config_dir;
    shape_cfg **cfgs; /* each its own allocation: a choice keeps its name while more are read */
    int ncfgs;
    loaded *kernels; /* and those that failed, passed over from then on */
    int nkernels;
    int pdl; /* blocktune_options.pdl */
};

static int fail(char *err, size_t n, const bt_err *e)
{
    if (err && n)
        snprintf(err, n, "%s", e->msg);
    return -1;
}

/* The modules live in the handle's context, which the calling thread may not have current (a
 * thread of its own has none): a call that loads, launches or unloads pushes it for its
 * duration when another or none is current. Returns 1 when pushed (leave_ctx pops it), 0 when
 * it already was current (one query: the common case, on every launch), -1 on failure (a NULL
 * handle too). */
static int enter_ctx(blocktune *bt, bt_err *e)
{
    if (!bt)
        return bt_fail(e, "the handle is NULL");
    CUcontext cur = NULL;
    CUresult r = bt->gpu.cu.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return bt_cuda_fail(&bt->gpu.cu, r, e, "cuCtxGetCurrent");
    if (cur == bt->gpu.ctx)
        return 0;
    r = bt->gpu.cu.cuCtxPushCurrent(bt->gpu.ctx);
    if (r != CUDA_SUCCESS)
        return bt_cuda_fail(&bt->gpu.cu, r, e, "making the handle's CUDA context current");
    return 1;
}

static void leave_ctx(blocktune *bt, int pushed)
{
    CUcontext ctx;
    if (pushed == 1)
        bt->gpu.cu.cuCtxPopCurrent(&ctx); /* (pushed on this thread, so it pops) */
}

int blocktune_open(blocktune **out, const blocktune_options *opt, char *err, size_t errlen)
{
    bt_err e = {{0}};
    if (!out) {
        bt_fail(&e, "the handle's address is NULL");
        return fail(err, errlen, &e);
    }
    blocktune *bt = bt_xcalloc(1, sizeof *bt);
    char *cache = opt && opt->cache_dir ? bt_strdup(opt->cache_dir) : bt_jit_default_cache_dir();
    int rc = bt_gpu_open(&bt->gpu, -1, cache, BT_JIT_KEEP_UNSTORED, 0, &bt->jit, &e);
    free(cache);
    if (rc) {
        free(bt);
        return fail(err, errlen, &e);
    }
    if (opt && opt->config_dir) {
        /* Resolved now, so that a later chdir does not move it; one that is not a directory
         * is refused rather than silently found empty. */
        char *dir = realpath(opt->config_dir, NULL);
        struct stat st;
        if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            bt_fail(&e, "config_dir %s: %s", opt->config_dir, dir ? "not a directory" : strerror(errno));
            free(dir);
            blocktune_close(bt);
            return fail(err, errlen, &e);
        }
        bt->config_dir = dir;
    }
    bt->pdl = opt && opt->pdl;
    *out = bt;
    return 0;
}

void blocktune_close(blocktune *bt)
{
    if (!bt)
        return;
    /* (Failing, the unloads fail the same way; there is nowhere to report either.) */
    int pushed = enter_ctx(bt, NULL);
    for (int i = 0; i < bt->nkernels; i++) {
        bt_kernel_unload(&bt->gpu, &bt->kernels[i].k);
        free(bt->kernels[i].failed);
    }
    leave_ctx(bt, pushed);
    for (int i = 0; i < bt->ncfgs; i++) {
        bt_config_free(&bt->cfgs[i]->cfg);
        free(bt->cfgs[i]);
    }
    free(bt->kernels);
    free(bt->cfgs);
    free(bt->config_dir);
    bt_jit_close(bt->jit);
    bt_gpu_close(&bt->gpu);
    free(bt);
}

static int to_variant(const blocktune_gemm_args *g, bt_variant *v, bt_err *e)
{
    if ((unsigned)g->input > BLOCKTUNE_INT8 || (unsigned)g->output > BLOCKTUNE_F32)
        return bt_fail(e, "unknown input or output type");
    if (g->block_n <= 0 || g->block_k <= 0 || g->block_n % 16 || g->block_k % 16)
        return bt_fail(e, "block_n and block_k must be positive multiples of 16 (got %d, %d)", g->block_n,
                       g->block_k);
    v->in = (bt_in_type)g->input, v->out = (bt_out_type)g->output;
    v->block_n = g->block_n, v->block_k = g->block_k;
    return 0;
}

/* What blocktune_gemm refuses for a call of M rows, refused as well before a kernel is chosen
 * or compiled for it. */
static int check_call(const blocktune_gemm_args *g, long M, bt_variant *v, bt_gemm_args *a, bt_err *e)
{
    *a = (bt_gemm_args){g->A, g->B, g->As, g->Bs, g->C, M, g->N, g->K};
    return to_variant(g, v, e) || bt_gemm_check(a, e) ? -1 : 0;
}

/* check_call for one call's own arguments (gemm, describe), which may be NULL. */
static int check_args(const blocktune_gemm_args *g, bt_variant *v, bt_gemm_args *a, bt_err *e)
{
    if (!g)
        return bt_fail(e, "the arguments are NULL");
    return check_call(g, g->M, v, a, e);
}

/* The config file of a family for (N, K, types) in the config directory, read once. */
static const shape_cfg *config_for(blocktune *bt, const bt_family *f, long N, long K, const bt_variant *v)
{
    for (int i = 0; i < bt->ncfgs; i++) {
        shape_cfg *s = bt->cfgs[i];
        if (s->fam == f && s->N == N && s->K == K && memcmp(&s->v, v, sizeof *v) == 0)
            return s;
    }
    bt->cfgs = bt_xrealloc(bt->cfgs, sizeof *bt->cfgs * (size_t)(bt->ncfgs + 1));
    shape_cfg *s = bt->cfgs[bt->ncfgs++] = bt_xcalloc(1, sizeof *s);
    s->fam = f, s->N = N, s->K = K, s->v = *v;
    if (!bt->config_dir)
        return s;
    /* SGLang's name first, then vLLM's. */
    for (int fmt = BT_FMT_SGLANG; fmt <= BT_FMT_VLLM; fmt++) {
        char name[1024], path[5200];
        if (bt_config_filename(name, sizeof name, f, N, K, bt->gpu.info.name, v->in, v->block_n,
                               v->block_k, (bt_format)fmt) ||
            bt_sprintf(path, sizeof path, "%s/%s", bt->config_dir, name) || access(path, R_OK) != 0)
            continue;
        bt_err e;
        if (bt_config_read(path, f, &s->cfg, &e) == 0) {
            snprintf(s->name, sizeof s->name, "%s", name);
            s->unread[0] = '\0';
            break;
        }
        snprintf(s->unread, sizeof s->unread, "%s", e.msg); /* (describe says so) */
    }
    return s;
}

typedef struct {
    const bt_family *fam;
    bt_cand cand;
    const char *source; /* config file name, or NULL for the heuristic */
    long batch;
    /* Without a family: why the classic heuristic cannot run (the family that runs wherever any
     * does), to say why nothing can. */
    bt_reject rej;
    char why[256];
    /* The first choice passed over because its kernel failed to compile or load (no family:
     * none was), for describe; and the last such failure, why nothing runs when all failed. */
    struct {
        const bt_family *fam;
        bt_cand cand;
        const char *source;
        long batch;
        const char *why;
    } failed;
    const char *last_failure;
    loaded *have; /* the chosen kernel's entry in the handle's list (loaded), or NULL: not yet */
} choice;

/* The kernel of (f, cand, v) in the handle's list, loaded or failed; NULL when never tried. */
static loaded *find_kernel(blocktune *bt, const bt_family *f, const bt_cand *cand, const bt_variant *v)
{
    for (int i = 0; i < bt->nkernels; i++) {
        loaded *l = &bt->kernels[i];
        if (l->fam == f && memcmp(&l->cand, cand, sizeof *cand) == 0 && memcmp(&l->v, v, sizeof *v) == 0)
            return l;
    }
    return NULL;
}

/* Whether the kernel of a choice failed before, noting it in c: choose passes over it rather than
 * compile it again on every call. Otherwise c keeps its entry, loaded or NULL, for kernel_for. */
static int failed_before(blocktune *bt, const bt_family *f, const bt_cand *cand, const char *source, long batch,
                         const bt_variant *v, choice *c)
{
    loaded *l = find_kernel(bt, f, cand, v);
    c->have = l;
    if (!l || !l->failed)
        return 0;
    c->have = NULL;
    if (!c->failed.fam) {
        c->failed.fam = f, c->failed.cand = *cand, c->failed.source = source, c->failed.batch = batch;
        c->failed.why = l->failed;
    }
    c->last_failure = l->failed;
    return 1;
}

/* The families in the order a choice tries them (native first; either may be NULL). */
enum { NFAMILIES = 2 };
static void family_order(const bt_family *order[NFAMILIES])
{
    order[0] = bt_family_find("native"), order[1] = &bt_family_classic;
}

/* Native config for the shape if there is one, else classic, else the heuristic: the native
 * family's on targets it runs on, the classic family's (SGLang's default config) elsewhere. A
 * kernel that failed to compile or load is passed over for the next of these. */
static void choose(blocktune *bt, long M, long N, long K, const bt_variant *v, choice *c)
{
    const bt_family *order[NFAMILIES];
    family_order(order);
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NFAMILIES; i++) {
        if (!order[i])
            continue;
        const shape_cfg *s = config_for(bt, order[i], N, K, v);
        const bt_config_entry *e = bt_config_nearest(&s->cfg, M);
        if (e && order[i]->check(&e->cand, v, &bt->gpu.target, NULL, 0) == BT_REJ_NONE &&
            !failed_before(bt, order[i], &e->cand, s->name, e->batch, v, c)) {
            c->fam = order[i], c->cand = e->cand, c->source = s->name, c->batch = e->batch;
            return;
        }
    }
    for (size_t i = 0; i < NFAMILIES; i++) {
        if (!order[i])
            continue;
        order[i]->fallback(M, N, K, v, &bt->gpu.target, &c->cand);
        c->rej = order[i]->check(&c->cand, v, &bt->gpu.target, c->why, sizeof c->why);
        if (c->rej == BT_REJ_NONE && !failed_before(bt, order[i], &c->cand, NULL, 0, v, c)) {
            c->fam = order[i];
            return;
        }
    }
}

/* Why choose found nothing: every kernel it could run failed (the last, the heuristic's, says
 * why), a quantization block no kernel takes, or types the GPU lacks. */
static int no_kernel(const blocktune *bt, const bt_variant *v, const choice *c, bt_err *e)
{
    if (c->last_failure)
        return bt_fail(e, "%s", c->last_failure);
    if (c->rej == BT_REJ_SHAPE)
        return bt_fail(e, "no kernel supports the quantization block shape [%d, %d] (block_n, block_k): %s",
                       v->block_n, v->block_k, c->why);
    return bt_fail(e, "no kernel of any family runs %s on %s: %s", bt_in_name(v->in), bt->gpu.info.name, c->why);
}

/* The chosen kernel, compiled and loaded on first use: 0 with *out set; 1 when the kernel itself
 * failed (it does not compile, or this GPU refuses to load it), which is kept so that it is
 * neither compiled nor loaded again and choose passes over it; -1 on any other failure (no GPU
 * memory left, say), which is not kept: a later call tries again. A cache that cannot be
 * written is none: the compiled kernel is loaded from memory (and describe says so). */
static int kernel_for(blocktune *bt, const choice *c, const bt_variant *v, bt_kernel **out, bt_err *e)
{
    if (!c->fam)
        return no_kernel(bt, v, c, e);
    if (c->have) { /* (a loaded one: choose passes over those that failed) */
        *out = &c->have->k;
        return 0;
    }
    char *src = bt_jit_source(c->fam, &c->cand, v, NULL);
    void *cubin = NULL;
    size_t len;
    bt_jit_job job = {.name = "kernel", .source = src};
    bt_kernel k;
    int rc = -1;
    if (bt_jit_run(bt->jit, &job, 1, 1, NULL, NULL, e))
        goto out;
    if (job.status == BT_JIT_FAILED) {
        char log[512]; /* NVRTC's log spans lines; the message is one */
        bt_one_line(log, sizeof log, job.log ? job.log : "");
        bt_fail(e, "kernel failed to compile: %s", log);
        rc = 1;
        goto out;
    }
    if (bt_jit_read_cubin(&job, &cubin, &len, e))
        goto out;
    int load = bt_kernel_load(&bt->gpu, cubin, c->fam, &c->cand, v, &k, e);
    rc = load == 0 ? 0 : load == -1 ? 1 : -1;
out:
    if (rc >= 0) {
        bt->kernels = bt_xrealloc(bt->kernels, sizeof *bt->kernels * (size_t)(bt->nkernels + 1));
        loaded *l = &bt->kernels[bt->nkernels++];
        memset(l, 0, sizeof *l);
        l->fam = c->fam, l->cand = c->cand, l->v = *v;
        if (rc == 0)
            l->k = k, *out = &l->k;
        else
            l->failed = bt_strdup(e->msg);
    }
    free(cubin);
    free(src);
    bt_jit_job_clear(&job);
    return rc;
}

/* The kernel a call of M rows runs: the one choose picks, or when that kernel fails, the next
 * choice's (the failure is kept, so choose passes over it and this ends). With `capture`, the
 * stream of a call: a kernel not loaded yet is refused while it captures a graph, where loading
 * a module is not allowed (blocktune_prepare loads it beforehand). */
static bt_kernel *dispatch(blocktune *bt, long M, long N, long K, const bt_variant *v, const CUstream *capture,
                           bt_err *e)
{
    choice c;
    bt_kernel *k = NULL;
    int rc;
    do {
        choose(bt, M, N, K, v, &c);
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        if (capture && c.fam && !c.have && bt->gpu.cu.cuStreamIsCapturing(*capture, &st) == CUDA_SUCCESS &&
            st != CU_STREAM_CAPTURE_STATUS_NONE) {
            bt_fail(e, "M = %ld: its kernel is not loaded and the stream is capturing a graph; call blocktune_prepare "
                    "with this M before the capture", M);
            return NULL;
        }
        rc = kernel_for(bt, &c, v, &k, e);
    } while (rc == 1);
    return rc == 0 ? k : NULL;
}

int blocktune_prepare(blocktune *bt, const blocktune_gemm_args *shape, const long *Ms, int nM, char *err,
                      size_t errlen)
{
    bt_err e = {{0}};
    bt_variant v;
    if (!shape) {
        bt_fail(&e, "the shape is NULL");
        return fail(err, errlen, &e);
    }
    if (nM < 0 || (nM > 0 && !Ms)) {
        bt_fail(&e, "nM = %d with Ms %s: want a list of nM batch sizes", nM, Ms ? "given" : "NULL");
        return fail(err, errlen, &e);
    }
    /* Every M before any compile, so a bad one compiles nothing; the shape and types even
     * with no M. */
    bt_gemm_args a;
    for (int i = 0; i < (nM > 0 ? nM : 1); i++)
        if (check_call(shape, nM > 0 ? Ms[i] : 1, &v, &a, &e))
            return fail(err, errlen, &e);
    int pushed = enter_ctx(bt, &e), rc = -1;
    if (pushed < 0)
        return fail(err, errlen, &e);
    for (int i = 0; i < nM; i++)
        if (!dispatch(bt, Ms[i], shape->N, shape->K, &v, NULL, &e))
            goto out;
    rc = 0;
out:
    leave_ctx(bt, pushed);
    return rc ? fail(err, errlen, &e) : 0;
}

int blocktune_gemm(blocktune *bt, const blocktune_gemm_args *g, CUstream stream, char *err, size_t errlen)
{
    bt_err e = {{0}};
    bt_variant v;
    bt_gemm_args a;
    if (check_args(g, &v, &a, &e) || bt_gemm_check_pointers(&a, v.out, &e)) /* (prepare and describe read none) */
        return fail(err, errlen, &e);
    int pushed = enter_ctx(bt, &e), rc = -1;
    if (pushed < 0)
        return fail(err, errlen, &e);
    bt_kernel *k = dispatch(bt, g->M, g->N, g->K, &v, &stream, &e);
    rc = !k || bt_kernel_launch(&bt->gpu, k, &a, stream, bt->pdl, &e) ? -1 : 0;
    leave_ctx(bt, pushed);
    return rc ? fail(err, errlen, &e) : 0;
}

/* "classic BLOCK_SIZE_M=64 ... (config NAME, batch 64)", or "(built-in heuristic)" for none. */
static void describe_choice(const bt_family *f, const bt_cand *cand, const char *source, long batch, char *buf,
                            size_t n)
{
    char desc[256];
    bt_cand_format(f, cand, desc, sizeof desc);
    if (source)
        snprintf(buf, n, "%s %s (config %s, batch %ld)", f->name, desc, source, batch);
    else
        snprintf(buf, n, "%s %s (built-in heuristic)", f->name, desc);
}

int blocktune_describe(blocktune *bt, const blocktune_gemm_args *g, char *buf, size_t n)
{
    bt_err e = {{0}};
    bt_variant v;
    choice c;
    if (!buf)
        return -1; /* nowhere to describe or say why */
    bt_gemm_args a;
    if (check_args(g, &v, &a, &e))
        return fail(buf, n, &e);
    if (!bt) {
        bt_fail(&e, "the handle is NULL");
        return fail(buf, n, &e);
    }
    choose(bt, g->M, g->N, g->K, &v, &c);
    if (!c.fam) {
        no_kernel(bt, &v, &c, &e);
        return fail(buf, n, &e);
    }
    char runs[1400], failed[1400], notes[3 * BT_ERRMAX + 96] = "";
    describe_choice(c.fam, &c.cand, c.source, c.batch, runs, sizeof runs);
    /* A config file passed over because it could not be read is named, with why. */
    const bt_family *fams[NFAMILIES];
    family_order(fams);
    for (size_t i = 0; i < NFAMILIES; i++) {
        const shape_cfg *s = fams[i] ? config_for(bt, fams[i], g->N, g->K, &v) : NULL;
        if (s && s->unread[0])
            snprintf(notes + strlen(notes), sizeof notes - strlen(notes), "; config not read: %s", s->unread);
    }
    /* Kernels that compile in every process (no cache to keep them) make a slow first call. */
    const char *unstored = bt_jit_unstored(bt->jit);
    if (unstored)
        snprintf(notes + strlen(notes), sizeof notes - strlen(notes), "; compiled kernels are not cached: %s",
                 unstored);
    if (c.failed.fam) {
        describe_choice(c.failed.fam, &c.failed.cand, c.failed.source, c.failed.batch, failed, sizeof failed);
        snprintf(buf, n, "%s, instead of %s, which failed: %s%s", runs, failed, c.failed.why, notes);
    } else {
        snprintf(buf, n, "%s%s", runs, notes);
    }
    return 0;
}
