/* tune: the blocktune command. Parses flags, then either serves as the GPU worker (hidden
 * --worker) or runs the tuning; usage errors exit 2, failures 1, Ctrl-C 130. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tune.h"
#include "worker.h"

/* The one piece of process-wide state: Ctrl-C (or SIGTERM, as `timeout` and job schedulers
 * send) asks the run to stop after the candidate in flight, so the journal and the finished
 * batch sizes are written (stop_requested); a second one stops at once (signalled: one came). */
static volatile sig_atomic_t stop_requested, signalled;

/* A stop passed on by the parent process of a run on several GPUs (tune --devices) to its GPU
 * processes: it only asks, and does not count as a first Ctrl-C, since the process may get the
 * same Ctrl-C or the job's SIGTERM itself too, before or after it. */
static void on_relayed_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void on_sigint(int sig)
{
    if (signalled) { /* a second signal: stop now (delivered once this handler returns) */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    signalled = stop_requested = 1;
}

/* What went to standard output (the help, the tables) must have arrived: a full disk or a closed
 * pipe turns an exit code of 0 into 1, with one line on stderr. */
static int flush_stdout(int code)
{
    int e = fflush(stdout) == 0 ? 0 : errno;
    if (!e && !ferror(stdout))
        return code;
    fprintf(stderr, "tune: cannot write to standard output: %s\n", e ? strerror(e) : "write error");
    return code == BT_EXIT_OK ? BT_EXIT_FAIL : code;
}

int main(int argc, char **argv)
{
    bt_options o;
    bt_err err = {{0}};
    int r = bt_cli_parse(argc, argv, &o, stdout, &err);
    if (r < 0) {
        fprintf(stderr, "tune: %s\n", err.msg);
        return BT_EXIT_USAGE;
    }
    if (r > 0)
        return flush_stdout(BT_EXIT_OK);
    if (o.worker) {
        int code = bt_worker_main(o.device, o.cache_dir);
        bt_options_free(&o);
        return code;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_relayed_stop;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a GPU worker that died shows on its pipe as an error, not a signal */
    signal(SIGXFSZ, SIG_IGN); /* a write past the file size limit fails (EFBIG) and is cleaned up */
    int code = bt_tune(&o, &stop_requested, &err);
    if (code != BT_EXIT_OK)
        fprintf(stderr, "tune: %s\n", err.msg);
    bt_options_free(&o);
    return flush_stdout(code);
}
