#include "worker.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "family.h"
#include "gpu.h"

/* ---------------- parent side ---------------- */

struct bt_worker {
    pid_t pid;
    int to, from; /* pipe ends: requests, replies */
    char buf[8192];
    size_t nbuf;
};

int bt_worker_start(bt_worker **out, const char *exe, int device, const char *cache_dir, bt_err *err)
{
    int in[2] = {-1, -1}, outp[2] = {-1, -1};
    char dev[16];
    snprintf(dev, sizeof dev, "%d", device);
    if (pipe(in) || pipe(outp)) {
        bt_fail(err, "cannot create pipes for the GPU worker: %s", strerror(errno));
        goto fail;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        bt_fail(err, "cannot start the GPU worker: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(outp[1], 1);
        close(in[0]), close(in[1]), close(outp[0]), close(outp[1]);
        /* Ctrl-C and SIGTERM go to the parent, which finishes the candidate in flight and
         * stops us. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        /* So a worker stuck in a hung kernel, deaf to both, does not hold the GPU for good once
         * the parent is gone (killed, or a second Ctrl-C); kept across exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execl(exe, exe, "--worker", "--device", dev, "--cache-dir", cache_dir, (char *)NULL);
        fprintf(stderr, "cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(in[0]), close(outp[1]);
    bt_worker *w = bt_xcalloc(1, sizeof *w);
    w->pid = pid, w->to = in[1], w->from = outp[0];
    *out = w;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (outp[i] >= 0)
            close(outp[i]);
    }
    return -1;
}

static void reap(bt_worker *w, int kill_it)
{
    if (w->pid <= 0)
        return;
    if (kill_it)
        kill(w->pid, SIGKILL);
    while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    w->pid = 0;
}

bt_worker_status bt_worker_call(bt_worker *w, const char *request, char *reply, size_t n,
                                double timeout_s, bt_err *err)
{
    if (w->pid <= 0) {
        bt_fail(err, "the GPU worker is not running");
        return BT_WORKER_ERROR;
    }
    size_t len = strlen(request);
    for (size_t off = 0; off < len;) {
        ssize_t wr = write(w->to, request + off, len - off);
        if (wr < 0 && errno == EINTR)
            continue;
        if (wr <= 0) {
            reap(w, 1);
            bt_fail(err, "the GPU worker exited");
            return BT_WORKER_DIED;
        }
        off += (size_t)wr;
    }
    double deadline = bt_now() + timeout_s;
    for (;;) {
        char *nl = memchr(w->buf, '\n', w->nbuf);
        if (nl) {
            size_t line = (size_t)(nl - w->buf);
            snprintf(reply, n, "%.*s", (int)line, w->buf);
            memmove(w->buf, nl + 1, w->nbuf - line - 1);
            w->nbuf -= line + 1;
            return BT_WORKER_OK;
        }
        double left = deadline - bt_now();
        if (left <= 0) {
            reap(w, 1);
            bt_fail(err, "no answer from the GPU worker in %.0f s: killed", timeout_s);
            return BT_WORKER_TIMEOUT;
        }
        struct pollfd pfd = {.fd = w->from, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        if (w->nbuf == sizeof w->buf) {
            /* No reply is this long: the worker is not speaking the protocol, and the line's
             * tail must not pass for a reply. */
            w->nbuf = 0;
            reap(w, 1);
            bt_fail(err, "the GPU worker sent a line longer than %zu bytes: killed", sizeof w->buf);
            return BT_WORKER_ERROR;
        }
        ssize_t rd = read(w->from, w->buf + w->nbuf, sizeof w->buf - w->nbuf);
        if (rd < 0 && errno == EINTR)
            continue;
        if (rd <= 0) {
            reap(w, 1);
            bt_fail(err, "the GPU worker died");
            return BT_WORKER_DIED;
        }
        w->nbuf += (size_t)rd;
    }
}

void bt_worker_stop(bt_worker *w)
{
    if (!w)
        return;
    if (w->pid > 0) {
        ssize_t ignored = write(w->to, "quit\n", 5);
        (void)ignored;
        /* Give it a moment to release the GPU cleanly, then insist. */
        for (int i = 0; i < 50; i++) {
            int st;
            pid_t r = waitpid(w->pid, &st, WNOHANG);
            if (r == w->pid) {
                w->pid = 0;
                break;
            }
            usleep(20000);
        }
        reap(w, 1);
    }
    close(w->to);
    close(w->from);
    free(w);
}

/* ---------------- worker side ---------------- */

#define MAX_KERNELS 4096

typedef struct {
    bt_gpu gpu;
    bt_jit *jit;
    int have_problem;
    bt_variant variant;
    int pdl; /* check and time with programmatic dependent launch */
    unsigned long long seed; /* of the problem's inputs */
    bt_problem prob;
    bt_rotation rot;
    CUdeviceptr ref;
    int nkernels;
    char *paths[MAX_KERNELS];
    bt_kernel kernels[MAX_KERNELS];
} wstate;

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Error text on one line (driver messages are, NVRTC logs are not sent here). */
static const char *oneline(bt_err *e)
{
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return e->msg;
}

static void drop_problem(wstate *s)
{
    if (!s->have_problem)
        return;
    bt_rotation_free(&s->gpu, &s->rot);
    bt_problem_free(&s->gpu, &s->prob);
    if (s->ref)
        s->gpu.cu.cuMemFree(s->ref);
    s->ref = 0;
    s->have_problem = 0;
}

static int parse_variant(const char *in, const char *out, int bn, int bk, bt_variant *v)
{
    v->out = BT_OUT_F16; /* any other name, as before */
    bt_out_parse(out, &v->out);
    v->block_n = bn, v->block_k = bk;
    return bt_in_parse(in, &v->in) || bn <= 0 || bk <= 0 ? -1 : 0;
}

/* Returns -1 when the context may be broken (the worker must exit). */
static int do_problem(wstate *s, const char *args)
{
    long M, N, K;
    int bn, bk;
    unsigned long long seed;
    char in[16], out[16];
    bt_err err = {{0}};
    drop_problem(s);
    if (sscanf(args, "%ld %ld %ld %15s %15s %d %d %llu %d", &M, &N, &K, in, out, &bn, &bk, &seed, &s->pdl) != 9 ||
        parse_variant(in, out, bn, bk, &s->variant)) {
        reply("error bad problem request");
        return 0;
    }
    bt_gemm_args shape = {.M = M, .N = N, .K = K};
    if (bt_gemm_check(&shape, &err)) {
        reply("error %s", oneline(&err));
        return 0;
    }
    if (bt_problem_alloc(&s->gpu, M, N, K, &s->variant, &s->prob, &err)) {
        reply("error %s", oneline(&err));
        return 0;
    }
    s->have_problem = 1;
    CUresult r = s->gpu.cu.cuMemAlloc(&s->ref, (size_t)M * N * sizeof(float));
    if (r != CUDA_SUCCESS) {
        bt_cuda_fail(&s->gpu.cu, r, &err, "allocating the reference");
        reply("error %s", oneline(&err));
        drop_problem(s);
        return 0;
    }
    if (bt_problem_fill(&s->gpu, &s->prob, &s->variant, seed, &err) ||
        bt_reference(&s->gpu, &s->prob, &s->variant, s->ref, &err) ||
        bt_rotation_make(&s->gpu, &s->prob, 4 * (size_t)s->gpu.info.l2_bytes, &s->rot, &err)) {
        reply("error %s", oneline(&err));
        return -1;
    }
    s->seed = seed;
    reply("ok");
    return 0;
}

static int parse_cand(const bt_family *f, const char *text, bt_cand *c)
{
    memset(c, 0, sizeof *c);
    const char *p = text;
    for (int i = 0; i < f->nparams; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (i + 1 < f->nparams ? *end != ',' : *end != '\0'))
            return -1;
        c->v[i] = (int)v;
        p = end + 1;
    }
    return 0;
}

static bt_kernel *find_kernel(wstate *s, const char *path, const bt_family *f, const bt_cand *c, bt_err *err)
{
    for (int i = 0; i < s->nkernels; i++)
        if (strcmp(s->paths[i], path) == 0)
            return &s->kernels[i];
    if (s->nkernels == MAX_KERNELS) {
        /* A space of more kernels than are kept: start keeping over, rather than refuse every
         * kernel after the first MAX_KERNELS. */
        for (int i = 0; i < s->nkernels; i++) {
            bt_kernel_unload(&s->gpu, &s->kernels[i]);
            free(s->paths[i]);
        }
        s->nkernels = 0;
    }
    char *cubin = NULL;
    bt_kernel *k = &s->kernels[s->nkernels];
    if (bt_read_file(path, &cubin, NULL, err) ||
        bt_kernel_load(&s->gpu, cubin, f, c, &s->variant, k, err)) {
        free(cubin);
        return NULL;
    }
    free(cubin);
    s->paths[s->nkernels++] = bt_strdup(path);
    return k;
}

static int do_run(wstate *s, const char *args)
{
    char fam[32], vals[256];
    double prune;
    int at = 0;
    bt_cand c;
    bt_err err = {{0}};
    const bt_family *f;
    /* "FAMILY VALUES PRUNE_US PATH": the cubin's path is the rest of the line */
    if (sscanf(args, "%31s %255s %lf %n", fam, vals, &prune, &at) != 3 || !args[at] ||
        !(f = bt_family_find(fam)) || parse_cand(f, vals, &c)) {
        reply("launch bad run request");
        return 0;
    }
    if (!s->have_problem) {
        reply("launch no problem set");
        return 0;
    }
    bt_kernel *k = find_kernel(s, args + at, f, &c, &err);
    if (!k) {
        reply("launch %s", oneline(&err));
        return 0;
    }
    bt_check chk;
    bt_timing t;
    /* Timed with programmatic launch, a kernel is checked so too: right after a kernel that
     * writes its inputs late, so one that reads them before that kernel is complete fails. */
    if (bt_problem_poison(&s->gpu, &s->prob, s->gpu.stream, &err) ||
        (s->pdl && bt_problem_refill(&s->gpu, &s->prob, &s->variant, s->seed, s->gpu.stream, &err)) ||
        bt_kernel_launch(&s->gpu, k, &s->prob.args, s->gpu.stream, s->pdl, &err)) {
        reply("launch %s", oneline(&err));
        return 0;
    }
    CUresult r = s->gpu.cu.cuStreamSynchronize(s->gpu.stream);
    if (r != CUDA_SUCCESS) {
        bt_cuda_fail(&s->gpu.cu, r, &err, "running the kernel");
        reply("fault %s", oneline(&err));
        return -1;
    }
    if (bt_compare(&s->gpu, &s->prob, &s->variant, s->ref, &chk, &err)) {
        reply("fault %s", oneline(&err));
        return -1;
    }
    if (!bt_check_passed(&chk, s->variant.out)) {
        reply("wrong %.3g %llu %llu", chk.rel_err, chk.nonfinite, chk.guard);
        return 0;
    }
    if (bt_bench(&s->gpu, k, &s->rot, prune, s->pdl, &t, &err)) {
        reply("fault %s", oneline(&err));
        return -1;
    }
    if (t.pruned)
        reply("pruned %.3f %.3g", t.us, chk.rel_err);
    else
        reply("ok %.3f %.3g %.3f %d", t.us, chk.rel_err, t.spread, t.launches);
    return 0;
}

int bt_worker_main(int device, const char *cache_dir)
{
    wstate *s = bt_xcalloc(1, sizeof *s);
    bt_err err = {{0}};
    char line[8192];
    int status = 0;
    if (bt_gpu_open(&s->gpu, device, cache_dir, BT_JIT_STORE_REQUIRED, 1, &s->jit, &err)) {
        /* Answer the first request with the reason, so the parent can print it. */
        if (fgets(line, sizeof line, stdin))
            reply("error %s", oneline(&err));
        free(s);
        return 3;
    }
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "problem ", 8) == 0) {
            if (do_problem(s, line + 8)) {
                status = 3;
                break;
            }
        } else if (strncmp(line, "run ", 4) == 0) {
            if (do_run(s, line + 4)) {
                status = 3;
                break;
            }
        } else if (strcmp(line, "info") == 0) {
            bt_device_info *i = &s->gpu.info;
            reply("ok %s|%d%d|%d|%ld|%ld|%d", i->name, i->cc_major, i->cc_minor, i->sm_count,
                  i->smem_optin, i->l2_bytes, i->driver_version);
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            reply("error unknown request");
        }
    }
    if (status == 0) {
        /* A faulted context cannot free cleanly; only tidy up after a normal run. */
        drop_problem(s);
        for (int i = 0; i < s->nkernels; i++) {
            bt_kernel_unload(&s->gpu, &s->kernels[i]);
            free(s->paths[i]);
        }
        bt_gpu_close(&s->gpu);
        bt_jit_close(s->jit);
    }
    free(s);
    return status;
}
