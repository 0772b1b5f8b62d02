/* Work split over processes: forks children that each run a function, relays their standard
 * output and error to this process line by line, and gives them a block of shared memory (for
 * counters that the parent reads while they run). The tuner runs one child per GPU. */
#ifndef BT_FANOUT_H
#define BT_FANOUT_H

#include <stddef.h>

#include "util.h"

typedef struct bt_fanout bt_fanout;

/* Runs in child i (0 <= i < n), whose standard output and error are pipes to the parent; what it
 * returns is the child's exit status. */
typedef int (*bt_fanout_fn)(int i, void *shared, void *arg);

/* A line child i wrote, without its newline: to standard output (is_err 0) or error. */
typedef void (*bt_fanout_line_fn)(void *ud, int i, int is_err, const char *line);

/* Forks n children running fn, after flushing this process's stdio so nothing buffered is
 * written twice. shared: bytes of zeroed memory mapped into all of them. The children stay in
 * this process's group (a terminal's Ctrl-C and Ctrl-Z reach them too) and get SIGTERM if the
 * parent dies. */
int bt_fanout_start(bt_fanout **out, int n, size_t shared_bytes, bt_fanout_fn fn, void *arg, bt_err *err);
void *bt_fanout_shared(const bt_fanout *f);

/* Relays what the children wrote (waiting up to ms for something to arrive) and reaps those
 * that ended; returns how many are still running or still have output to relay. */
int bt_fanout_poll(bt_fanout *f, int ms, bt_fanout_line_fn line, void *ud);

/* Sends sig to every child still running. */
void bt_fanout_signal(bt_fanout *f, int sig);

/* Child i's exit status once bt_fanout_poll has reaped it: 0-255, or 128 + the signal that
 * ended it; -1 before. */
int bt_fanout_status(const bt_fanout *f, int i);

/* Kills (SIGKILL) and reaps any child still running, and frees f (NULL is ignored). */
void bt_fanout_free(bt_fanout *f);

#endif
