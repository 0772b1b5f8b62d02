#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "progress.h"
#include "util.h"

/* Everything written to f so far; caller frees. */
static char *contents(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *buf = malloc((size_t)n + 1);
    rewind(f);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fseek(f, 0, SEEK_END);
    return buf;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

TEST(progress_format_duration)
{
    static const struct {
        double s;
        const char *want;
    } cases[] = {
        {0, "0s"},          {12, "12s"},         {59.4, "59s"},      {59.6, "1m00s"},
        {185, "3m05s"},     {3599, "59m59s"},    {3600, "1h00m"},    {3720, "1h02m"},
        {90000, "25h00m"},  {-1, "--"},          {NAN, "--"},        {INFINITY, "--"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        bt_format_duration(cases[i].s, buf, sizeof buf);
        CHECK_STREQ(buf, cases[i].want);
    }
}

TEST(progress_plain_lines)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 0, 0, 100);
    bt_progress_stage(p, "N=7168 K=2304 1/2", "M=1 (1/2)");
    bt_progress_update(p, 10, 10, 50); /* within 10 s of the stage line: not printed */
    bt_progress_stage(p, "N=7168 K=2304 1/2", "M=16 (2/2)");
    bt_progress_note(p, "wrote %s", "x.json");
    bt_progress_free(p);
    char *out = contents(f);
    CHECK(strncmp(out, "[N=7168 K=2304 1/2] M=1 (1/2)  0%  ETA --\n"
                       "[N=7168 K=2304 1/2] M=16 (2/2)  10%  ETA ",
                  80) == 0);
    CHECK_CONTAINS(out, "s\nwrote x.json\n");
    CHECK_EQ(count(out, "\n"), 3);
    CHECK(strchr(out, '\r') == NULL);
    CHECK(strchr(out, '\x1b') == NULL);
    free(out);
    fclose(f);
}

TEST(progress_tty_line)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 1, 0, 1100);
    bt_progress_stage(p, "N=7168 K=2304 2/13", "M=64 (4/18)");
    bt_progress_update(p, 10, 10, 1100);
    bt_progress_note(p, "candidate %d faulted", 17);
    bt_progress_free(p);
    char *out = contents(f);
    CHECK(strncmp(out, "\r[N=7168 K=2304 2/13] M=64 (4/18)  0%  ETA --\x1b[K",
                  strlen("\r[N=7168 K=2304 2/13] M=64 (4/18)  0%  ETA --\x1b[K")) == 0);
    /* The note clears the line, prints on its own, and the line comes back. */
    CHECK_CONTAINS(out, "\r\x1b[Kcandidate 17 faulted\n"
                        "\r[N=7168 K=2304 2/13] M=64 (4/18)  candidates 10/1100  0%  ETA --\x1b[K");
    /* Freeing leaves a clean line. */
    size_t len = strlen(out);
    CHECK(len >= 4 && strcmp(out + len - 4, "\r\x1b[K") == 0);
    CHECK_EQ(count(out, "\n"), 1);
    free(out);
    fclose(f);
}

TEST(progress_tty_rate_limit)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 1, 0, 1000);
    double t0 = bt_now();
    bt_progress_stage(p, "N=1 K=1 1/1", NULL);
    for (int i = 1; i <= 1000; i++)
        bt_progress_update(p, i, i, 1000);
    double elapsed = bt_now() - t0;
    bt_progress_free(p);
    char *out = contents(f);
    /* One draw for the stage, then at most one per 0.1 s, and the final clear. */
    CHECK(count(out, "\r") <= 2 + (int)(elapsed / 0.1) + 1);
    CHECK_CONTAINS(out, "\r[N=1 K=1 1/1]  0%  ETA --\x1b[K");
    free(out);
    fclose(f);
}

TEST(progress_eta)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 1, 0, 1000);
    bt_progress_stage(p, "s", NULL);
    bt_progress_update(p, 10, 10, 1000); /* 1%, moments in: too early to tell */
    bt_progress_note(p, "a");
    bt_progress_update(p, 500, 500, 1000);
    bt_progress_note(p, "b");
    bt_progress_free(p);
    char *out = contents(f);
    CHECK_CONTAINS(out, "a\n\r[s]  candidates 10/1000  1%  ETA --\x1b[K");
    CHECK_CONTAINS(out, "b\n\r[s]  candidates 500/1000  50%  ETA ");
    CHECK(strstr(out, "50%  ETA --") == NULL);
    free(out);
    fclose(f);
}

/* On four lanes (GPUs) of which the work left keeps one busy, the work left goes at a quarter of
 * the rate so far. */
TEST(progress_eta_with_lanes)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 1, 0, 1000);
    bt_progress_stage(p, "s", NULL);
    usleep(1000000);
    bt_progress_update(p, 500, 0, 0); /* half in about a second: a second left */
    bt_progress_note(p, "a");
    bt_progress_lanes(p, 4, 1);
    bt_progress_note(p, "b");
    bt_progress_free(p);
    char *out = contents(f);
    CHECK_CONTAINS(out, "a\n\r[s]  50%  ETA 1s\x1b[K");
    CHECK_CONTAINS(out, "b\n\r[s]  50%  ETA 4s\x1b[K");
    free(out);
    fclose(f);
}

/* Cleared for other output (a shape's summary), the line comes back at the next stage with the
 * run's total and ETA. */
TEST(progress_clear_keeps_the_total)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 1, 0, 1000);
    bt_progress_stage(p, "N=1 K=1 1/2", NULL);
    bt_progress_update(p, 500, 500, 500);
    bt_progress_clear(p);
    fputs("summary\n", f);
    bt_progress_stage(p, "N=2 K=2 2/2", NULL);
    bt_progress_free(p);
    char *out = contents(f);
    CHECK_CONTAINS(out, "\r\x1b[Ksummary\n\r[N=2 K=2 2/2]  50%  ETA ");
    CHECK(strstr(out, "2/2]  50%  ETA --") == NULL);
    free(out);
    fclose(f);
}

TEST(progress_quiet)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 1, 1, 100);
    bt_progress_stage(p, "N=1 K=1 1/1", "M=1 (1/1)");
    bt_progress_update(p, 50, 50, 100);
    bt_progress_note(p, "wrote %s", "x.json");
    bt_progress_free(p);
    char *out = contents(f);
    CHECK_STREQ(out, "wrote x.json\n");
    free(out);
    fclose(f);
}

/* Work a resume found done leaves the total: the share and the ETA are of the work this run
 * does, at its own rate. */
TEST(progress_skip_leaves_the_total)
{
    FILE *f = tmpfile();
    bt_progress *p = bt_progress_new(f, 0, 0, 100);
    bt_progress_skip(p, 50);
    bt_progress_stage(p, "s", NULL);
    bt_progress_update(p, 25, 25, 50);
    bt_progress_stage(p, "t", NULL);
    bt_progress_free(p);
    char *out = contents(f);
    CHECK_CONTAINS(out, "[s]  0%  ETA --\n[t]  50%  ETA ");
    free(out);
    fclose(f);
}
