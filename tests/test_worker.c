/* The parent's side of the GPU worker protocol (worker.c), against stand-in workers: shell
 * scripts started in the worker's place that answer as a broken worker might. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

/* Kills `parent`, then waits up to 5 s for `worker` (reparented to this process) to end; 0 when
 * it did, by SIGKILL. */
static int outlives(pid_t parent, pid_t worker)
{
    int st;
    kill(parent, SIGKILL);
    waitpid(parent, &st, 0);
    for (int i = 0; i < 250; i++) {
        pid_t r = waitpid(worker, &st, WNOHANG);
        if (r == worker)
            return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 2;
        usleep(20000);
    }
    kill(worker, SIGKILL);
    waitpid(worker, &st, 0);
    return 1;
}

/* A worker must not outlive the tuner: one stuck in a hung kernel ignores SIGINT and SIGTERM
 * (bt_worker_start) and would hold the GPU until someone finds it, once the tuner is gone (killed,
 * or a second Ctrl-C). The tuner here is a process killed while its worker sleeps. */
TEST(worker_dies_with_its_parent)
{
    const char *exe = fake_worker("stuck-worker", "read req\necho $$\nexec sleep 30\n");
    int fds[2];
    if (pipe(fds))
        SKIP("no pipe");
    fflush(stdout);
    pid_t reaper = fork();
    if (reaper == 0) {
        /* The orphaned worker comes to this process, which sees how it ends. */
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        pid_t parent = fork();
        if (parent == 0) {
            bt_worker *w = NULL;
            bt_err err = {{0}};
            char reply[64] = "";
            if (bt_worker_start(&w, exe, 0, bt_test_tmpdir(), &err) ||
                bt_worker_call(w, "info\n", reply, sizeof reply, 10, &err) != BT_WORKER_OK)
                _exit(3);
            long pid = strtol(reply, NULL, 10);
            if (write(fds[1], &pid, sizeof pid) != sizeof pid)
                _exit(3);
            pause();
            _exit(0);
        }
        long worker = 0;
        close(fds[1]); /* a parent that failed before writing shows as end of file */
        if (parent < 0 || read(fds[0], &worker, sizeof worker) != sizeof worker || worker <= 0)
            _exit(3);
        _exit(outlives(parent, (pid_t)worker));
    }
    close(fds[0]), close(fds[1]);
    int st = 0;
    CHECK(reaper > 0);
    if (reaper > 0)
        waitpid(reaper, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0); /* 1: still running 5 s after its parent was killed */
}

/* The worker keeps the kernels it has loaded; a space of more candidates than it keeps (4096)
 * must still have every one measured. On the stand-in driver (tests/fakecuda), with 4097 cubin
 * files (any bytes do there). */
TEST(worker_measures_more_kernels_than_it_keeps)
{
    char fake[4200], dir[4200], path[4300], req[4400], reply[2048] = "";
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/cubins", bt_test_tmpdir());
    mkdir(dir, 0755);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    char *saved = bt_test_set_env("BT_LIBCUDA", fake);
    bt_worker *w = NULL;
    bt_err err = {{0}};
    snprintf(path, sizeof path, "%s/cache", bt_test_tmpdir());
    CHECK_EQ(bt_worker_start(&w, bt_test_tune(), 0, path, &err), 0);
    if (w) {
        CHECK_EQ(bt_worker_call(w, "problem 1 64 128 fp8 float16 128 128 1 0\n", reply, sizeof reply, 120, &err),
                 BT_WORKER_OK);
        CHECK_STREQ(reply, "ok");
        int bad = 0;
        for (int i = 0; i < 4097 && !bad; i++) {
            snprintf(path, sizeof path, "%s/%d.cubin", dir, i);
            FILE *f = fopen(path, "wb");
            if (f)
                fclose(f);
            snprintf(req, sizeof req, "run classic 16,64,128,1,4,3 0 %s\n", path);
            if (bt_worker_call(w, req, reply, sizeof reply, 60, &err) != BT_WORKER_OK ||
                strncmp(reply, "ok ", 3) != 0) {
                bt_check_fail(t, __FILE__, __LINE__, "kernel %d: %s", i, reply[0] ? reply : err.msg);
                bad = 1;
            }
        }
        bt_worker_stop(w);
    }
    bt_test_restore_env("BT_LIBCUDA", saved);
    signal(SIGPIPE, old);
}
