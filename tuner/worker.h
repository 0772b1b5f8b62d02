/* The GPU worker: a child process (this binary, --worker) that holds the CUDA context,
 * verifies and times candidates on request. A kernel that faults leaves its context unusable,
 * and one that hangs never returns: the parent survives both by restarting the worker.
 *
 * Protocol, one line each way:
 *   problem M N K fp8|int8 OUT BLOCK_N BLOCK_K SEED PDL -> ok | error MSG
 *   run FAMILY CUBIN v0,v1,... PRUNE_US                 -> ok US REL_ERR SPREAD LAUNCHES
 *                                                        | pruned US REL_ERR
 *                                                        | wrong REL_ERR NONFINITE GUARD
 *                                                        | launch MSG    (not loadable/launchable)
 *                                                        | fault MSG     (then the worker exits)
 *   info                                                 -> ok NAME|CC|SMS|SMEM|L2|DRIVER
 *   quit
 * PDL 1: the problem's candidates are timed with programmatic dependent launch.
 */
#ifndef BT_WORKER_H
#define BT_WORKER_H

#include "util.h"

typedef struct bt_worker bt_worker;

typedef enum {
    BT_WORKER_OK = 0,
    BT_WORKER_ERROR,   /* could not talk to it at all (err says why) */
    BT_WORKER_DIED,    /* it exited or crashed before answering */
    BT_WORKER_TIMEOUT, /* no answer in time: killed */
} bt_worker_status;

/* Starts `exe --worker --device D --cache-dir DIR`. The process ignores SIGPIPE (main.c), so
 * that a request to a worker that died fails instead of killing it. */
int bt_worker_start(bt_worker **out, const char *exe, int device, const char *cache_dir, bt_err *err);
/* Sends one request line and waits up to timeout_s for one reply line. */
bt_worker_status bt_worker_call(bt_worker *w, const char *request, char *reply, size_t n,
                                double timeout_s, bt_err *err);
/* Asks it to quit (kills it if it does not) and reaps it. */
void bt_worker_stop(bt_worker *w);

/* The worker process' main loop on stdin/stdout; returns its exit status. */
int bt_worker_main(int device, const char *cache_dir);

#endif
