/* The journal: results appended (one JSON line each, flushed) as they are measured, so an
 * interrupted run resumes without re-measuring. The first line is a header naming the device,
 * shape, variant and search space; --resume refuses a journal whose header differs. */
#ifndef BT_JOURNAL_H
#define BT_JOURNAL_H

#include "family.h"
#include "util.h"

typedef enum {
    BT_RES_OK = 0,      /* verified and timed */
    BT_RES_WRONG,       /* ran, output did not match the reference */
    BT_RES_FAULT,       /* the kernel faulted (worker restarted) */
    BT_RES_TIMEOUT,     /* the kernel hung and the worker was killed */
    BT_RES_COMPILE,     /* NVRTC failed */
    BT_RES_LAUNCH,      /* could not be loaded or launched (e.g. resources) */
    BT_RES_PRUNED,      /* verified; its first replay was so slow it was not timed further */
    BT_RES_COUNT
} bt_res_status;

const char *bt_res_name(bt_res_status s);

typedef struct {
    long M;
    int is_default;   /* the runtime's default config, timed for comparison */
    bt_cand cand;
    bt_res_status status;
    double us;        /* median microseconds (BT_RES_OK) */
    double rel_err;   /* relative Frobenius error vs the reference (when it ran) */
    char note[160];   /* failure detail */
} bt_result;

/* Header fields; all must match for --resume. */
typedef struct {
    char device[256];
    char family[16];
    long N, K;
    char in[8], out[16];
    int block_n, block_k;
    char arch[16];
    char space_digest[65];
    char launch[16]; /* "stream", or "programmatic" (tune --pdl) */
} bt_journal_header;

typedef struct bt_journal bt_journal;

/* Opens path. resume=0: starts a new journal (replacing any old one). resume=1: an existing
 * journal must have an identical header (else err names the field that differs) and its
 * results are returned in file order in *prior (caller frees; prior and nprior may be NULL);
 * a missing journal starts fresh. A torn last line (crash mid-write) is ignored and cut off.
 * The journal stays locked while open: a second run on the same path is refused. */
int bt_journal_open(const char *path, const bt_journal_header *h, int resume, bt_journal **out,
                    bt_result **prior, size_t *nprior, const struct bt_family *f, bt_err *err);
/* Appends one result and flushes it to the kernel (write(2) of one whole line). */
int bt_journal_append(bt_journal *j, const bt_result *r, bt_err *err);
/* Closes; remove=1 deletes the file (the shape is finished and its config written). */
void bt_journal_close(bt_journal *j, int remove);

#endif
