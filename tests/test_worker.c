/* The parent's side of the GPU worker protocol (worker.c), against stand-in workers: shell
 * scripts started in the worker's place that answer as a broken worker might. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "worker.h"

/* An executable script under the scratch directory standing in for `tune --worker`. */
static const char *fake_worker(const char *name, const char *body)
{
    char text[4096];
    snprintf(text, sizeof text, "#!/bin/sh\n%s", body);
    const char *p = bt_scratch_file(name, text);
    chmod(p, 0755);
    return p;
}

/* A line longer than the reply buffer is not a reply, nor is its tail: here the tail alone
 * reads as a verified, timed candidate. */
TEST(worker_overlong_reply_is_refused)
{
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    const char *exe = fake_worker("overlong-worker",
                                  "read req\n"
                                  "head -c 8192 /dev/zero | tr '\\0' x\n"
                                  "echo 'ok 9.000 0 0.010 1'\n"
                                  "exec sleep 30\n");
    bt_worker *w = NULL;
    bt_err err = {{0}};
    char reply[2048] = "";
    CHECK_EQ(bt_worker_start(&w, exe, 0, bt_test_tmpdir(), &err), 0);
    if (w) {
        bt_worker_status st = bt_worker_call(w, "run x 1 0 /c\n", reply, sizeof reply, 10, &err);
        CHECK(st != BT_WORKER_OK);
        CHECK_CONTAINS(err.msg, "longer than");
        CHECK(strchr(err.msg, '\n') == NULL);
        if (st == BT_WORKER_OK)
            printf("    taken as a reply: \"%.60s\"\n", reply);
        bt_worker_stop(w);
    }
    signal(SIGPIPE, old);
}
