#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util.h"

#define TTY_INTERVAL_S 0.1    /* a terminal line is redrawn at most ten times a second */
#define PLAIN_INTERVAL_S 10.0 /* a log gets a line at most every ten seconds between stages */
/* Before this much work or time the rate says little about the rest. */
#define ETA_MIN_FRACTION 0.02
#define ETA_MIN_S 3.0

#define CLEAR_LINE "\r\x1b[K"

struct bt_progress {
    FILE *f;
    int tty, quiet;
    double total, units;
    long done, count; /* the stage's candidates */
    int lanes, busy;  /* bt_progress_lanes */
    char what[128], sub[128];
    double t0, last; /* start; the last line written */
    int shown;       /* a progress line is on the terminal */
};

bt_progress *bt_progress_new(FILE *f, int tty, int quiet, double total_units)
{
    bt_progress *p = bt_xcalloc(1, sizeof *p);
    p->f = f;
    p->tty = tty < 0 ? isatty(fileno(f)) : tty;
    p->quiet = quiet;
    p->total = total_units;
    p->lanes = p->busy = 1;
    p->t0 = bt_now();
    p->last = -INFINITY;
    return p;
}

static void add(char *buf, size_t n, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t n, size_t *used, const char *fmt, ...)
{
    if (*used >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, n - *used, fmt, ap);
    va_end(ap);
    if (w > 0)
        *used += (size_t)w;
}

/* "[N=7168 K=2304 2/13] M=64 (4/18)  candidates 340/1100  31%  ETA 2m13s" */
static void format_line(const bt_progress *p, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    if (p->what[0])
        add(buf, n, &used, "[%s]", p->what);
    if (p->sub[0])
        add(buf, n, &used, "%s%s", used ? " " : "", p->sub);
    if (p->count > 0)
        add(buf, n, &used, "  candidates %ld/%ld", p->done, p->count);
    if (p->total > 0) {
        double frac = fmin(fmax(p->units / p->total, 0), 1), elapsed = bt_now() - p->t0;
        char eta[32] = "--";
        if (p->units > 0 && (frac >= ETA_MIN_FRACTION || elapsed >= ETA_MIN_S))
            bt_format_duration(elapsed * (p->total - p->units) / p->units * p->lanes / p->busy, eta, sizeof eta);
        add(buf, n, &used, "  %d%%  ETA %s", (int)(frac * 100), eta);
    }
}

static int term_width(FILE *f)
{
    struct winsize ws;
    return ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

static void emit(bt_progress *p)
{
    char line[512];
    format_line(p, line, sizeof line);
    if (p->tty) {
        /* A line that wraps can no longer be rewritten by '\r'. */
        int width = term_width(p->f);
        if (width > 1 && strlen(line) >= (size_t)width)
            line[width - 1] = '\0';
        fprintf(p->f, "\r%s\x1b[K", line);
        p->shown = 1;
    } else {
        fprintf(p->f, "%s\n", line);
    }
    fflush(p->f);
    p->last = bt_now();
}

void bt_progress_stage(bt_progress *p, const char *what, const char *sub)
{
    if (p->quiet)
        return;
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    snprintf(p->sub, sizeof p->sub, "%s", sub ? sub : "");
    p->done = p->count = 0;
    emit(p);
}

void bt_progress_update(bt_progress *p, double units_done, long done, long total)
{
    if (p->quiet)
        return;
    p->units = units_done;
    p->done = done;
    p->count = total;
    if (bt_now() - p->last >= (p->tty ? TTY_INTERVAL_S : PLAIN_INTERVAL_S))
        emit(p);
}

void bt_progress_lanes(bt_progress *p, int lanes, int busy)
{
    p->lanes = lanes > 1 ? lanes : 1;
    p->busy = busy < 1 ? 1 : busy > p->lanes ? p->lanes : busy;
}

void bt_progress_skip(bt_progress *p, double units)
{
    p->total = fmax(p->total - units, 0);
}

void bt_progress_note(bt_progress *p, const char *fmt, ...)
{
    va_list ap;
    if (p->shown)
        fputs(CLEAR_LINE, p->f);
    va_start(ap, fmt);
    vfprintf(p->f, fmt, ap);
    va_end(ap);
    fputc('\n', p->f);
    if (p->shown)
        emit(p);
    fflush(p->f);
}

void bt_progress_clear(bt_progress *p)
{
    if (p->shown) {
        fputs(CLEAR_LINE, p->f);
        fflush(p->f);
        p->shown = 0;
    }
}

void bt_progress_free(bt_progress *p)
{
    if (!p)
        return;
    bt_progress_clear(p);
    free(p);
}

void bt_format_duration(double seconds, char *buf, size_t n)
{
    if (!isfinite(seconds) || seconds < 0) {
        snprintf(buf, n, "--");
        return;
    }
    long s = lround(fmin(seconds, 1e12));
    if (s < 60)
        snprintf(buf, n, "%lds", s);
    else if (s < 3600)
        snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, n, "%ldh%02ldm", s / 3600, s % 3600 / 60);
}
