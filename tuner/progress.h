/* Progress on a terminal: one line rewritten in place with the current shape, batch size,
 * candidates done/total and an ETA; plain lines at a modest rate when not a terminal.
 * One thread drives a bt_progress. */
#ifndef BT_PROGRESS_H
#define BT_PROGRESS_H

#include <stdio.h>

typedef struct bt_progress bt_progress;

/* total_units: all work of the run (e.g. shapes x batch sizes x candidates); the ETA assumes
 * the units still to do take as long as those done, so leave work a resume skips out of it
 * (bt_progress_skip).
 * tty < 0: detect from isatty(fileno(f)). quiet: no progress output (notes still print). */
bt_progress *bt_progress_new(FILE *f, int tty, int quiet, double total_units);
/* Sets what is being worked on, e.g. "N=7168 K=2304 2/13" and "M=64 (4/18)" (sub may be
 * NULL), and shows it at once. */
void bt_progress_stage(bt_progress *p, const char *what, const char *sub);
/* Reports units finished so far (cumulative) and the stage's done/total count. */
void bt_progress_update(bt_progress *p, double units_done, long done, long total);
/* Takes units out of the run's total: work a resume finds done in a journal, or that a shape
 * that failed leaves undone. The ETA is then that of the work left at this run's own rate, not
 * at one that counts the journal's results as done in no time. */
void bt_progress_skip(bt_progress *p, double units);
/* The work runs on `lanes` workers at once (several GPUs), of which what is left keeps only
 * `busy` at work (fewer once fewer shapes are left than GPUs): the ETA takes the work left at
 * the rate of `busy` lanes, not of all. Without this call, one lane. */
void bt_progress_lanes(bt_progress *p, int lanes, int busy);
/* Prints a message (no trailing newline) on its own line without garbling the progress
 * line. */
void bt_progress_note(bt_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the line so that other output can follow; the next stage shows it again, with the
 * run's total and ETA kept. */
void bt_progress_clear(bt_progress *p);
/* Clears the line and frees p (NULL is ignored). */
void bt_progress_free(bt_progress *p);

/* "1h02m", "3m05s", "12s"; "--" for a negative or non-finite time. */
void bt_format_duration(double seconds, char *buf, size_t n);

#endif
