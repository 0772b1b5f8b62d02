/* NVRTC: instantiates a family's template for one candidate, compiles it to a cubin for the
 * target architecture, and keeps cubins in an on-disk cache keyed by everything that changes
 * the binary (template sources, options, NVRTC version, architecture). */
#ifndef BT_JIT_H
#define BT_JIT_H

#include "family.h"
#include "util.h"

typedef struct bt_jit bt_jit;

typedef enum { BT_JIT_PENDING = 0, BT_JIT_CACHED, BT_JIT_COMPILED, BT_JIT_FAILED } bt_jit_status;

typedef struct {
    /* in */
    const char *name; /* for messages, e.g. the candidate in readable form */
    const char *source; /* full CUDA source; may #include any embedded template by name */
    /* out */
    bt_jit_status status;
    char key[65];        /* cache key (sha256 hex) */
    char path[4096];     /* cubin in the cache */
    char *log;           /* NVRTC log on failure (freed by bt_jit_job_clear) */
    void *cubin;         /* the cubin itself where the cache could not keep it
                          * (BT_JIT_KEEP_UNSTORED; freed by bt_jit_job_clear), else NULL */
    size_t cubin_len;
    int regs;            /* registers per thread (read from the cubin), -1 if unknown */
    int spill_bytes;     /* spill stores + loads from ptxas's report; 0 for a kernel with no
                          * stack frame; -1 if unknown (NVRTC does not always pass it on) */
    double seconds;      /* compile time (0 when cached) */
} bt_jit_job;

/* The source that instantiates a family's template for one candidate (caller frees; NULL if
 * the family cannot format the candidate's #defines): those #defines, then `extra` (test
 * hooks; may be NULL), then #include of the entry. */
char *bt_jit_source(const bt_family *f, const bt_cand *c, const bt_variant *v, const char *extra);

/* The cache directory when none is given (caller frees): $XDG_CACHE_HOME/blocktune, else
 * $HOME/.cache/blocktune, else ./.blocktune-cache. */
char *bt_jit_default_cache_dir(void);

/* What a cache that cannot be written means. BT_JIT_STORE_REQUIRED: an error, at open or in
 * the run that meets it (the tuner, whose GPU workers load cubins from the cache).
 * BT_JIT_KEEP_UNSTORED: each cubin the cache cannot take stays in its job, and the next process
 * compiles it again (the library, which may run where nothing can be written, such as a
 * read-only container; a cache filled beforehand is still read). */
enum { BT_JIT_STORE_REQUIRED = 0, BT_JIT_KEEP_UNSTORED = 1 };

/* Opens (creating) the cache directory for target arch. */
int bt_jit_open(const char *cache_dir, const bt_target *target, int mode, bt_jit **out, bt_err *err);
void bt_jit_close(bt_jit *j);

/* Why compiled cubins are not kept in the cache (BT_JIT_KEEP_UNSTORED: the directory cannot be
 * written, or a write failed), or NULL while they are. */
const char *bt_jit_unstored(const bt_jit *j);

/* Compiles all jobs with up to threads workers (threads <= 0: one per online CPU); each job
 * ends CACHED, COMPILED or FAILED. Jobs start zeroed apart from name and source; a job's
 * outputs from an earlier run are released and reset. Jobs with identical sources compile
 * once (the others end CACHED). progress (may be NULL) is called from the calling thread
 * while the sources are hashed, before the first job, as jobs finish, and every 50 ms
 * meanwhile (with 0 done until the first job ends); when it returns nonzero no
 * job starts after it, and those not started stay PENDING. Returns 0 unless the cache itself
 * is unusable (BT_JIT_STORE_REQUIRED); per-job failures are in the jobs. */
int bt_jit_run(bt_jit *j, bt_jit_job *jobs, size_t n, int threads,
               int (*progress)(void *ud, size_t done, size_t total), void *ud, bt_err *err);

/* What in a successful compile's log makes the kernel unfit to run, or NULL: ptxas saying it
 * serialized the wgmma pipeline (its C7510-C7520 performance notes), which leaves a kernel
 * correct but several times slower than its design, or that it injected a wait for the wgmma
 * in flight (C7517), which takes the overlap of two K blocks away. */
const char *bt_jit_log_problem(const char *log);

/* A copy of a job's cubin, from the job or the cache (caller frees). */
int bt_jit_read_cubin(const bt_jit_job *job, void **data, size_t *len, bt_err *err);

void bt_jit_job_clear(bt_jit_job *job);

/* "13.0" */
const char *bt_jit_nvrtc_version(void);

/* The template sources compiled into the binary (name and text). */
typedef struct {
    const char *name;
    const char *text;
} bt_template_file;
extern const bt_template_file bt_templates[];
extern const int bt_ntemplates;

#endif
