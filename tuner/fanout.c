#include "fanout.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK 65536 /* a pipe's capacity */

/* One stream of one child: its pipe's read end (-1 once at end of file) and the start of a
 * line not yet complete. */
typedef struct {
    int fd;
    char *buf;
    size_t len;
} stream;

typedef struct {
    pid_t pid; /* 0 once reaped */
    int status;
    stream s[2]; /* standard output, standard error */
} child;

struct bt_fanout {
    int n;
    child *c;
    void *shared;
    size_t shared_bytes;
};

void *bt_fanout_shared(const bt_fanout *f) { return f->shared; }

int bt_fanout_status(const bt_fanout *f, int i) { return f->c[i].pid ? -1 : f->c[i].status; }

int bt_fanout_start(bt_fanout **out, int n, size_t shared_bytes, bt_fanout_fn fn, void *arg, bt_err *err)
{
    bt_fanout *f = bt_xcalloc(1, sizeof *f);
    f->n = 0;
    f->c = bt_xcalloc((size_t)n, sizeof *f->c);
    f->shared_bytes = shared_bytes ? shared_bytes : 1;
    f->shared = mmap(NULL, f->shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (f->shared == MAP_FAILED) {
        f->shared = NULL;
        bt_fail(err, "cannot map memory shared with the GPU processes: %s", strerror(errno));
        goto fail;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    for (int i = 0; i < n; i++) {
        int po[2], pe[2];
        if (pipe(po)) {
            bt_fail(err, "cannot create pipes for GPU process %d: %s", i, strerror(errno));
            goto fail;
        }
        if (pipe(pe)) {
            bt_fail(err, "cannot create pipes for GPU process %d: %s", i, strerror(errno));
            close(po[0]), close(po[1]);
            goto fail;
        }
        pid_t pid = fork();
        if (pid < 0) {
            bt_fail(err, "cannot start GPU process %d: %s", i, strerror(errno));
            close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
            goto fail;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != parent)
                _exit(127);
            for (int j = 0; j < i; j++) /* the earlier children's pipes are theirs and ours */
                close(f->c[j].s[0].fd), close(f->c[j].s[1].fd);
            dup2(po[1], 1);
            dup2(pe[1], 2);
            close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
            /* Fully buffered (stdout kept a terminal's line buffering): what the child flushes
             * at once reaches the parent in one piece, not interleaved with another's lines. */
            setvbuf(stdout, NULL, _IOFBF, CHUNK);
            int code = fn(i, f->shared, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(code & 255);
        }
        close(po[1]), close(pe[1]);
        f->c[i] = (child){.pid = pid, .status = -1, .s = {{.fd = po[0]}, {.fd = pe[0]}}};
        f->n = i + 1;
    }
    *out = f;
    return 0;
fail:
    bt_fanout_free(f);
    return -1;
}

/* Passes on each complete line of s (all of it at end of file). */
static void relay(stream *s, int i, int is_err, int eof, bt_fanout_line_fn line, void *ud)
{
    size_t start = 0;
    for (size_t k = 0; k < s->len; k++)
        if (s->buf[k] == '\n') {
            s->buf[k] = '\0';
            line(ud, i, is_err, s->buf + start);
            start = k + 1;
        }
    if (eof && start < s->len) {
        s->buf = bt_xrealloc(s->buf, s->len + 1);
        s->buf[s->len] = '\0';
        line(ud, i, is_err, s->buf + start);
        start = s->len;
    }
    if (start > 0) {
        memmove(s->buf, s->buf + start, s->len - start);
        s->len -= start;
    }
}

int bt_fanout_poll(bt_fanout *f, int ms, bt_fanout_line_fn line, void *ud)
{
    struct pollfd *p = bt_xcalloc((size_t)f->n * 2, sizeof *p);
    int np = 0;
    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < 2; k++)
            if (f->c[i].s[k].fd >= 0)
                p[np++] = (struct pollfd){.fd = f->c[i].s[k].fd, .events = POLLIN};
    if (np > 0 && poll(p, (nfds_t)np, ms) > 0) {
        for (int i = 0; i < f->n; i++)
            for (int k = 1; k >= 0; k--) { /* a child's notes before the table that follows them */
                stream *s = &f->c[i].s[k];
                int ready = 0;
                for (int q = 0; q < np; q++)
                    ready |= p[q].fd == s->fd && s->fd >= 0 && p[q].revents;
                if (!ready)
                    continue;
                char chunk[CHUNK];
                ssize_t got = read(s->fd, chunk, sizeof chunk);
                if (got < 0 && errno == EINTR)
                    continue;
                if (got > 0) {
                    s->buf = bt_xrealloc(s->buf, s->len + (size_t)got);
                    memcpy(s->buf + s->len, chunk, (size_t)got);
                    s->len += (size_t)got;
                }
                relay(s, i, k, got <= 0, line, ud);
                if (got <= 0) {
                    close(s->fd);
                    s->fd = -1;
                }
            }
    } else if (np == 0 && ms > 0) {
        usleep((useconds_t)ms * 1000); /* (output all read: only exits left to wait for) */
    }
    free(p);
    int left = 0;
    for (int i = 0; i < f->n; i++) {
        child *c = &f->c[i];
        int st;
        if (c->pid && waitpid(c->pid, &st, WNOHANG) == c->pid) {
            c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            c->pid = 0;
        }
        left += c->pid != 0 || c->s[0].fd >= 0 || c->s[1].fd >= 0;
    }
    return left;
}

void bt_fanout_signal(bt_fanout *f, int sig)
{
    for (int i = 0; i < f->n; i++)
        if (f->c[i].pid)
            kill(f->c[i].pid, sig);
}

void bt_fanout_free(bt_fanout *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++) {
        child *c = &f->c[i];
        if (c->pid) {
            kill(c->pid, SIGKILL);
            while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        for (int k = 0; k < 2; k++) {
            if (c->s[k].fd >= 0)
                close(c->s[k].fd);
            free(c->s[k].buf);
        }
    }
    if (f->shared)
        munmap(f->shared, f->shared_bytes);
    free(f->c);
    free(f);
}
