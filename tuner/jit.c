#include "jit.h"

#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Bump when the cache layout or the meaning of a cached entry changes. */
#define BT_JIT_FORMAT "blocktune-jit-1"

/* Everything fixed but the architecture; the key covers all of it. -default-device: to NVRTC a
 * generic lambda (native.cuh's main loop, one copy per tile offset) is a host function without it. */
static const char *const fixed_opts[] = {"-std=c++17", "--ptxas-options=-v", "-DBT_NVRTC=1", "-default-device"};
#define BT_NFIXED (sizeof fixed_opts / sizeof fixed_opts[0])

struct bt_jit {
    char dir[4096]; /* <cache_dir>/<arch> */
    char arch_opt[64];
    const char *opts[BT_NFIXED + 1];
    const char **hdr_names, **hdr_texts;
    bt_sha256 base; /* key state over format, NVRTC version, arch and options */
    int keep;       /* BT_JIT_KEEP_UNSTORED */
    int readonly;   /* with keep: the directory cannot be written, so no cubin is stored */
    char *unstored; /* why cubins are not stored (bt_jit_unstored), or NULL */
};

/* ---- NVRTC version ---- */

static pthread_once_t version_once = PTHREAD_ONCE_INIT;
static char version_str[32]; /* written once, under version_once */

static void version_init(void)
{
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
        snprintf(version_str, sizeof version_str, "unknown");
    else
        snprintf(version_str, sizeof version_str, "%d.%d", major, minor);
}

const char *bt_jit_nvrtc_version(void)
{
    pthread_once(&version_once, version_init);
    return version_str;
}

/* ---- source ---- */

char *bt_jit_source(const bt_family *f, const bt_cand *c, const bt_variant *v, const char *extra)
{
    char defs[4096];
    if (f->defines(c, v, defs, sizeof defs))
        return NULL;
    if (!extra)
        extra = "";
    size_t n = strlen(defs) + strlen(extra) + strlen(f->entry) + 16;
    char *s = bt_xmalloc(n);
    snprintf(s, n, "%s%s#include \"%s\"\n", defs, extra, f->entry);
    return s;
}

/* ---- cache keys ---- */

/* Length-prefixed, so no two different field sequences hash the same bytes. */
static void hash_field(bt_sha256 *s, const char *text)
{
    size_t n = strlen(text);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    bt_sha256_update(s, len, sizeof len);
    bt_sha256_update(s, text, n);
}

char *bt_jit_default_cache_dir(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    /* The XDG base directory spec says a relative path there is to be ignored. */
    if (xdg && xdg[0] == '/' && bt_sprintf(buf, sizeof buf, "%s/blocktune", xdg) == 0)
        return bt_strdup(buf);
    if (home && home[0] && bt_sprintf(buf, sizeof buf, "%s/.cache/blocktune", home) == 0)
        return bt_strdup(buf);
    return bt_strdup(".blocktune-cache");
}

int bt_jit_open(const char *cache_dir, const bt_target *target, int mode, bt_jit **out, bt_err *err)
{
    bt_jit *j = bt_xcalloc(1, sizeof *j);
    j->keep = mode == BT_JIT_KEEP_UNSTORED;
    if (!target->arch[0]) {
        bt_fail(err, "cubin cache: no target architecture");
        goto fail;
    }
    if (bt_sprintf(j->dir, sizeof j->dir, "%s/%s", cache_dir, target->arch) ||
        bt_sprintf(j->arch_opt, sizeof j->arch_opt, "--gpu-architecture=%s", target->arch)) {
        bt_fail(err, "cubin cache: %s: path too long", cache_dir);
        goto fail;
    }
    bt_err werr;
    if (bt_check_writable_dir(j->dir, &werr)) {
        if (!j->keep) {
            *err = werr;
            bt_wrap(err, "cubin cache");
            goto fail;
        }
        j->readonly = 1;
        j->unstored = bt_strdup(werr.msg);
    }
    j->opts[0] = j->arch_opt;
    for (size_t i = 0; i < BT_NFIXED; i++)
        j->opts[i + 1] = fixed_opts[i];

    j->hdr_names = bt_xcalloc((size_t)bt_ntemplates, sizeof *j->hdr_names);
    j->hdr_texts = bt_xcalloc((size_t)bt_ntemplates, sizeof *j->hdr_texts);
    for (int i = 0; i < bt_ntemplates; i++) {
        j->hdr_names[i] = bt_templates[i].name;
        j->hdr_texts[i] = bt_templates[i].text;
    }

    bt_sha256_init(&j->base);
    hash_field(&j->base, BT_JIT_FORMAT);
    hash_field(&j->base, bt_jit_nvrtc_version());
    hash_field(&j->base, target->arch);
    for (size_t i = 0; i < BT_NFIXED + 1; i++)
        hash_field(&j->base, j->opts[i]);
    *out = j;
    return 0;
fail:
    free(j);
    return -1;
}

void bt_jit_close(bt_jit *j)
{
    if (!j)
        return;
    free(j->hdr_names);
    free(j->hdr_texts);
    free(j->unstored);
    free(j);
}

const char *bt_jit_unstored(const bt_jit *j) { return j->unstored; }

static void *copy_of(const void *data, size_t n)
{
    void *p = bt_xmalloc(n);
    memcpy(p, data, n);
    return p;
}

static void sha_hex(const void *data, size_t n, char out[65])
{
    bt_sha256 s;
    bt_sha256_init(&s);
    bt_sha256_update(&s, data, n);
    bt_sha256_hex(&s, out);
}

/* Marks the embedded templates that text includes (`#include "name"`), directly or through
 * other templates: only those can change the binary, so editing one family's template leaves
 * the other family's cache entries valid. */
static void mark_includes(const char *text, unsigned char *seen)
{
    for (const char *p = text; (p = strstr(p, "#include \"")) != NULL;) {
        p += strlen("#include \"");
        const char *q = strchr(p, '"');
        if (!q)
            break;
        for (int i = 0; i < bt_ntemplates; i++) {
            const char *name = bt_templates[i].name;
            if (!seen[i] && strlen(name) == (size_t)(q - p) && strncmp(name, p, (size_t)(q - p)) == 0) {
                seen[i] = 1;
                mark_includes(bt_templates[i].text, seen);
            }
        }
        p = q;
    }
}

static int job_paths(const bt_jit *j, bt_jit_job *job)
{
    bt_sha256 s = j->base;
    unsigned char *seen = bt_xcalloc((size_t)bt_ntemplates, 1);
    mark_includes(job->source, seen);
    for (int i = 0; i < bt_ntemplates; i++)
        if (seen[i]) {
            hash_field(&s, bt_templates[i].name);
            hash_field(&s, bt_templates[i].text);
        }
    free(seen);
    hash_field(&s, job->source);
    bt_sha256_hex(&s, job->key);
    return bt_sprintf(job->path, sizeof job->path, "%s/%.2s/%s.cubin", j->dir, job->key, job->key);
}

/* The sidecar beside a cubin: same name, .meta for .cubin (so it always fits). */
static void meta_path(const char *cubin, char out[4096])
{
    snprintf(out, 4096, "%.*s.meta", (int)(strlen(cubin) - strlen(".cubin")), cubin);
}

/* ---- cache entries ---- */

/* A hit needs a well-formed meta and a cubin whose hash it names; anything else is a miss. */
static int cache_lookup(const char *cubin, const char *meta, int *regs, int *spills)
{
    char *mtext = NULL, *data = NULL;
    size_t mlen, dlen;
    int rc = -1, used = -1;
    long r, s;
    char rtext[12], stext[12], want[65], got[65];
    if (bt_read_file(meta, &mtext, &mlen, NULL))
        goto out;
    if (sscanf(mtext, "regs %11[-0-9]\nspill_bytes %11[-0-9]\ncubin_sha256 %64[0-9a-f]\n%n",
               rtext, stext, want, &used) != 3 ||
        used < 0 || (size_t)used != mlen || strlen(want) != 64 ||
        bt_parse_long(rtext, -1, 1 << 16, &r) || bt_parse_long(stext, -1, 1L << 30, &s))
        goto out;
    if (bt_read_file(cubin, &data, &dlen, NULL))
        goto out;
    sha_hex(data, dlen, got);
    if (strcmp(got, want) != 0)
        goto out;
    *regs = (int)r;
    *spills = (int)s;
    rc = 0;
out:
    free(mtext);
    free(data);
    return rc;
}

/* The cubin first, then the meta that names its hash: an entry cut short between the two
 * writes, or a stale meta beside a new cubin, reads as a miss rather than a wrong hit. */
static int cache_store(const bt_jit_job *job, const char *meta, const void *cubin, size_t len,
                       bt_err *err)
{
    char dir[4096], sum[65], mtext[160];
    snprintf(dir, sizeof dir, "%s", job->path);
    *strrchr(dir, '/') = '\0';
    if (bt_mkdirs(dir, err))
        return -1;
    sha_hex(cubin, len, sum);
    snprintf(mtext, sizeof mtext, "regs %d\nspill_bytes %d\ncubin_sha256 %s\n", job->regs,
             job->spill_bytes, sum);
    if (bt_write_file_atomic(job->path, cubin, len, err) ||
        bt_write_file_atomic(meta, mtext, strlen(mtext), err))
        return -1;
    return 0;
}

/* ---- compiling ---- */

/* Registers come from the cubin itself: NVRTC's copy of ptxas's -v report is not always there
 * (on some hosts the log of a successful compile comes back empty). The ELF section .nv.info
 * holds EIATTR records: a format byte, an attribute byte, then for format 0x04 a 16-bit size
 * and a payload (function symbol, value), else a 16-bit value. */
enum { EIFMT_SVAL = 0x04, EIATTR_FRAME_SIZE = 0x11, EIATTR_REGCOUNT = 0x2f };

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The largest register count and stack frame of the cubin's functions; -1 where absent. */
static void cubin_resources(const uint8_t *d, size_t len, int *regs, long *frame)
{
    *regs = -1;
    *frame = -1;
    if (len < 64 || memcmp(d, "\177ELF", 4) != 0 || d[4] != 2 /* 64-bit */ || d[5] != 1 /* LE */)
        return;
    uint64_t shoff = rd64(d + 0x28);
    unsigned shentsize = rd16(d + 0x3a), shnum = rd16(d + 0x3c), shstrndx = rd16(d + 0x3e);
    if (shentsize < 64 || shstrndx >= shnum || shoff > len ||
        (uint64_t)shnum * shentsize > len - shoff)
        return;
    const uint8_t *strtab = d + shoff + (uint64_t)shstrndx * shentsize;
    uint64_t stroff = rd64(strtab + 24), strsize = rd64(strtab + 32);
    if (stroff > len || strsize > len - stroff)
        return;
    for (unsigned i = 0; i < shnum; i++) {
        const uint8_t *sh = d + shoff + (uint64_t)i * shentsize;
        uint64_t name = rd32(sh), off = rd64(sh + 24), size = rd64(sh + 32);
        if (name + sizeof ".nv.info" > strsize || off > len || size > len - off ||
            memcmp(d + stroff + name, ".nv.info", sizeof ".nv.info") != 0)
            continue;
        for (uint64_t p = off; p + 4 <= off + size;) {
            const uint8_t *r = d + p;
            uint64_t next = p + 4 + (r[0] == EIFMT_SVAL ? rd16(r + 2) : 0);
            if (next > off + size)
                break;
            if (r[0] == EIFMT_SVAL && rd16(r + 2) >= 8) {
                uint32_t v = rd32(r + 8);
                if (r[1] == EIATTR_REGCOUNT && v < 65536 && (int)v > *regs)
                    *regs = (int)v;
                if (r[1] == EIATTR_FRAME_SIZE && v < (1u << 30) && (long)v > *frame)
                    *frame = (long)v;
            }
            p = next;
        }
    }
}

/* Spills only ptxas reports ("N bytes spill stores, M bytes spill loads" per function); a
 * program holds one kernel, so the worst function speaks for it. Without the report, a zero
 * stack frame still proves there was nothing to spill. */
static int spill_bytes(const char *log, long frame)
{
    int worst = -1;
    for (const char *p = log; (p = strstr(p, "stack frame, ")) != NULL; p++) {
        int st, ld;
        if (sscanf(p, "stack frame, %d bytes spill stores, %d bytes spill loads", &st, &ld) == 2 &&
            st + ld > worst)
            worst = st + ld;
    }
    return worst < 0 && frame == 0 ? 0 : worst;
}

static char *program_log(nvrtcProgram prog)
{
    size_t n = 0;
    if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
        return bt_strdup("");
    char *log = bt_xmalloc(n + 1);
    if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        n = 0;
    log[n] = '\0';
    return log;
}

static char *nvrtc_message(const char *call, nvrtcResult r, const char *log)
{
    const char *what = nvrtcGetErrorString(r);
    size_t n = strlen(call) + strlen(what) + strlen(log) + 8;
    char *s = bt_xmalloc(n);
    snprintf(s, n, "%s: %s%s%s", call, what, *log ? "\n" : "", log);
    return s;
}

const char *bt_jit_log_problem(const char *log)
{
    if (!log)
        return NULL;
    const char *why = strstr(log, "wgmma.mma_async instructions are serialized");
    return why ? why : strstr(log, "warpgroup.wait is injected");
}

/* Compiles one job; on success *cubin holds the binary (caller frees). */
static int compile(const bt_jit *j, bt_jit_job *job, char **cubin, size_t *len)
{
    nvrtcProgram prog = NULL;
    char *log = NULL;
    int rc = -1;
    nvrtcResult r = nvrtcCreateProgram(&prog, job->source, "candidate.cu", bt_ntemplates,
                                       j->hdr_texts, j->hdr_names);
    if (r != NVRTC_SUCCESS) {
        prog = NULL;
        job->log = nvrtc_message("nvrtcCreateProgram", r, "");
        goto out;
    }
    r = nvrtcCompileProgram(prog, (int)(BT_NFIXED + 1), j->opts);
    log = program_log(prog);
    if (r != NVRTC_SUCCESS) {
        /* A compile error's log speaks for itself; anything else also needs NVRTC's word. */
        job->log = r == NVRTC_ERROR_COMPILATION ? log : nvrtc_message("nvrtcCompileProgram", r, log);
        if (job->log == log)
            log = NULL;
        goto out;
    }
    const char *why = bt_jit_log_problem(log);
    if (why) {
        const char *end = strchr(why, '\n');
        size_t n = end ? (size_t)(end - why) : strlen(why);
        size_t size = n + 96;
        job->log = bt_xmalloc(size);
        snprintf(job->log, size, "ptxas: %.*s (the kernel would run far below its design)", (int)n, why);
        goto out;
    }
    if ((r = nvrtcGetCUBINSize(prog, len)) != NVRTC_SUCCESS) {
        job->log = nvrtc_message("nvrtcGetCUBINSize", r, "");
        goto out;
    }
    if (*len == 0) {
        job->log = bt_strdup("nvrtcGetCUBINSize: NVRTC produced no cubin");
        goto out;
    }
    *cubin = bt_xmalloc(*len);
    if ((r = nvrtcGetCUBIN(prog, *cubin)) != NVRTC_SUCCESS) {
        free(*cubin);
        *cubin = NULL;
        job->log = nvrtc_message("nvrtcGetCUBIN", r, "");
        goto out;
    }
    long frame;
    cubin_resources((const uint8_t *)*cubin, *len, &job->regs, &frame);
    job->spill_bytes = spill_bytes(log, frame);
    rc = 0;
out:
    free(log);
    if (prog)
        nvrtcDestroyProgram(&prog);
    return rc;
}

/* ---- the pool ---- */

/* progress runs at least this often, so that a caller can stop the pool during a long compile. */
#define PROGRESS_TICK_NS 50000000L

typedef struct {
    const bt_jit *j;
    bt_jit_job *jobs;
    const size_t *todo;   /* job indices to process: one per distinct key */
    const size_t *weight; /* jobs each of them stands for (itself and its duplicates) */
    size_t ntodo, next, done;
    int active, stop; /* threads not yet finished; no job starts once stop is set */
    int cache_failed;
    bt_err cache_err; /* the first cache write failure */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pool;

static void run_job(pool *p, bt_jit_job *job)
{
    char meta[4096];
    bt_err err;
    char *cubin = NULL;
    size_t len = 0;
    meta_path(job->path, meta);
    if (cache_lookup(job->path, meta, &job->regs, &job->spill_bytes) == 0) {
        job->status = BT_JIT_CACHED;
        return;
    }
    double t0 = bt_now();
    if (compile(p->j, job, &cubin, &len)) {
        job->status = BT_JIT_FAILED;
        return;
    }
    job->seconds = bt_now() - t0;
    if (p->j->readonly || cache_store(job, meta, cubin, len, &err)) {
        if (p->j->keep) { /* the job keeps it instead */
            job->status = BT_JIT_COMPILED;
            job->cubin = cubin, job->cubin_len = len;
            cubin = NULL;
        } else {
            job->status = BT_JIT_FAILED;
            job->log = bt_strdup(err.msg);
        }
        if (!p->j->readonly) {
            pthread_mutex_lock(&p->mu);
            if (!p->cache_failed)
                p->cache_err = err;
            p->cache_failed = 1;
            pthread_mutex_unlock(&p->mu);
        }
    } else {
        job->status = BT_JIT_COMPILED;
    }
    free(cubin);
}

static void *worker(void *arg)
{
    pool *p = arg;
    pthread_mutex_lock(&p->mu);
    /* (a failed cache fails the run, unless the jobs keep their cubins) */
    while (!p->stop && !(p->cache_failed && !p->j->keep) && p->next < p->ntodo) {
        size_t k = p->next++;
        pthread_mutex_unlock(&p->mu);
        run_job(p, &p->jobs[p->todo[k]]);
        pthread_mutex_lock(&p->mu);
        p->done += p->weight[k];
        pthread_cond_signal(&p->cv);
    }
    p->active--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

typedef struct {
    const char *key;
    size_t i;
} key_ent;

static int cmp_key(const void *a, const void *b)
{
    const key_ent *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

int bt_jit_run(bt_jit *j, bt_jit_job *jobs, size_t n, int threads,
               int (*progress)(void *ud, size_t done, size_t total), void *ud, bt_err *err)
{
    int rc = -1, started = 0;
    pthread_t *tids = NULL;
    key_ent *ents = bt_xcalloc(n, sizeof *ents);
    size_t *leader = bt_xcalloc(n, sizeof *leader);
    size_t *todo = bt_xcalloc(n, sizeof *todo), *weight = bt_xcalloc(n, sizeof *weight);
    pool p = {.j = j, .jobs = jobs, .todo = todo, .weight = weight};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);

    for (size_t i = 0; i < n; i++)
        bt_jit_job_clear(&jobs[i]);
    for (size_t i = 0; i < n; i++) {
        if (!jobs[i].source) {
            bt_fail(err, "%s: no source to compile", jobs[i].name ? jobs[i].name : "job");
            goto out;
        }
        /* hashing a thousand sources takes a second or more (ten under a sanitizer): asked
         * every 64, a stop is not kept waiting for it */
        if (progress && i % 64 == 63 && progress(ud, 0, n)) {
            rc = 0; /* stopped: every job still pending */
            goto out;
        }
        if (job_paths(j, &jobs[i])) {
            bt_fail(err, "cubin cache: %s: path too long", j->dir);
            goto out;
        }
        ents[i] = (key_ent){jobs[i].key, i};
    }
    /* Identical sources compile once: two threads must never write the same cache entry. */
    qsort(ents, n, sizeof *ents, cmp_key);
    for (size_t k = 0; k < n; k++) {
        if (k > 0 && strcmp(ents[k].key, ents[k - 1].key) == 0) {
            leader[ents[k].i] = leader[ents[k - 1].i];
            weight[p.ntodo - 1]++;
        } else {
            leader[ents[k].i] = ents[k].i;
            todo[p.ntodo] = ents[k].i;
            weight[p.ntodo++] = 1;
        }
    }

    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? (int)cpus : 1;
    }
    if ((size_t)threads > p.ntodo)
        threads = (int)p.ntodo;
    if (progress && progress(ud, 0, n)) /* stopped before the first job */
        threads = 0;
    tids = bt_xcalloc((size_t)threads, sizeof *tids);
    p.active = threads; /* less those that fail to start */
    for (int t = 0; t < threads; t++) {
        int e = pthread_create(&tids[t], NULL, worker, &p);
        if (e) {
            pthread_mutex_lock(&p.mu);
            p.active -= threads - t;
            pthread_mutex_unlock(&p.mu);
            if (started == 0) {
                bt_fail(err, "cannot start compile threads: %s", strerror(e));
                goto out;
            }
            break;
        }
        started++;
    }

    pthread_mutex_lock(&p.mu);
    for (size_t reported = 0;;) {
        int ticked = 0;
        while (p.done == reported && p.active > 0 && !ticked) {
            struct timespec at;
            clock_gettime(CLOCK_REALTIME, &at);
            at.tv_nsec += PROGRESS_TICK_NS;
            if (at.tv_nsec >= 1000000000L)
                at.tv_sec++, at.tv_nsec -= 1000000000L;
            ticked = pthread_cond_timedwait(&p.cv, &p.mu, &at) == ETIMEDOUT;
        }
        if (p.done == reported && p.active == 0) /* every thread has finished */
            break;
        reported = p.done;
        if (progress) {
            pthread_mutex_unlock(&p.mu);
            int stop = progress(ud, reported, n);
            pthread_mutex_lock(&p.mu);
            p.stop |= stop != 0;
        }
    }
    pthread_mutex_unlock(&p.mu);

    for (size_t i = 0; i < n; i++) {
        const bt_jit_job *l = &jobs[leader[i]];
        if (leader[i] == i || l->status == BT_JIT_PENDING) /* (not started: stopped) */
            continue;
        jobs[i].status = l->status == BT_JIT_FAILED ? BT_JIT_FAILED : BT_JIT_CACHED;
        jobs[i].regs = l->regs;
        jobs[i].spill_bytes = l->spill_bytes;
        if (l->log)
            jobs[i].log = bt_strdup(l->log);
        if (l->cubin)
            jobs[i].cubin = copy_of(l->cubin, l->cubin_len), jobs[i].cubin_len = l->cubin_len;
    }
    if (p.cache_failed && j->keep) { /* kept in the jobs; later cubins are not tried */
        j->readonly = 1;
        j->unstored = bt_strdup(p.cache_err.msg);
    } else if (p.cache_failed) {
        bt_fail(err, "cubin cache: %s", p.cache_err.msg);
        goto out;
    }
    rc = 0;
out:
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    free(tids);
    free(ents);
    free(leader);
    free(todo);
    free(weight);
    return rc;
}

int bt_jit_read_cubin(const bt_jit_job *job, void **data, size_t *len, bt_err *err)
{
    char *buf;
    if (job->status != BT_JIT_CACHED && job->status != BT_JIT_COMPILED)
        return bt_fail(err, "%s: no cubin (the compile failed or never ran)",
                       job->name ? job->name : job->key);
    if (job->cubin) {
        *data = copy_of(job->cubin, job->cubin_len);
        *len = job->cubin_len;
        return 0;
    }
    if (bt_read_file(job->path, &buf, len, err))
        return -1;
    *data = buf;
    return 0;
}

void bt_jit_job_clear(bt_jit_job *job)
{
    free(job->log);
    job->log = NULL;
    free(job->cubin);
    job->cubin = NULL;
    job->cubin_len = 0;
    job->status = BT_JIT_PENDING;
    job->key[0] = '\0';
    job->path[0] = '\0';
    job->regs = job->spill_bytes = -1;
    job->seconds = 0;
}
