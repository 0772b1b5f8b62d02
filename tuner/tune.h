/* The tuning run: shapes x batch sizes x candidates. Resolves the search space, shapes and
 * target, rejects candidates that cannot run (before compiling), compiles the rest through the
 * cache, and -- unless it is a dry run -- verifies and times every candidate on the GPU through
 * the worker, journaling results, and writes one config file per shape. */
#ifndef BT_TUNE_H
#define BT_TUNE_H

#include <signal.h>

#include "cli.h"
#include "util.h"

/* Exit codes. */
enum { BT_EXIT_OK = 0, BT_EXIT_FAIL = 1, BT_EXIT_USAGE = 2, BT_EXIT_INTERRUPTED = 130 };

/* Runs what o asks for; *stop becomes non-zero on Ctrl-C (set by the caller's handler). With
 * --devices the GPU processes are forked from the caller, and their parent passes a stop on to
 * them with SIGUSR1, whose handler must only set *stop. Returns an exit code; err is filled for
 * BT_EXIT_FAIL and BT_EXIT_USAGE. */
int bt_tune(const bt_options *o, volatile sig_atomic_t *stop, bt_err *err);

#endif
