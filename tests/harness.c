#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    const char *name, *file;
    bt_test_fn fn;
} entry;

static entry *tests;
static int ntests, cap;
static char root[4096], tune[4096], tmpdir[4096];

void bt_test_register(const char *name, const char *file, bt_test_fn fn)
{
    if (ntests == cap) {
        cap = cap ? cap * 2 : 64;
        tests = realloc(tests, sizeof *tests * (size_t)cap);
        if (!tests)
            abort();
    }
    tests[ntests++] = (entry){name, file, fn};
}

void bt_check_fail(bt_t *t, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stdout, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    t->failed++;
}

const char *bt_test_root(void) { return root; }
const char *bt_test_tune(void) { return tune; }

int bt_test_fake_driver(char *fake, size_t n)
{
    snprintf(fake, n, "%s", tune);
    char *slash = strrchr(fake, '/');
    snprintf(slash ? slash + 1 : fake, n - (size_t)(slash ? slash + 1 - fake : 0), "tests/libfakecuda.so");
    return access(fake, R_OK);
}
const char *bt_test_tmpdir(void) { return tmpdir; }

char *bt_test_set_env(const char *name, const char *value)
{
    const char *v = getenv(name);
    char *old = v ? strdup(v) : NULL;
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    return old;
}

void bt_test_restore_env(const char *name, char *old)
{
    if (old)
        setenv(name, old, 1);
    else
        unsetenv(name);
    free(old);
}

int bt_run_tune(char **out, const char *const *args)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/run-output.%ld", tmpdir, (long)getpid());
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0)
            _exit(127);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        int n = 0;
        while (args[n])
            n++;
        char **argv = calloc((size_t)n + 2, sizeof *argv);
        argv[0] = tune;
        for (int i = 0; i < n; i++)
            argv[i + 1] = (char *)args[i];
        if (chdir(root) != 0)
            _exit(127);
        execv(tune, argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    FILE *f = fopen(path, "rb");
    size_t len = 0, capb = 1 << 16;
    char *buf = malloc(capb);
    if (f) {
        size_t got;
        while ((got = fread(buf + len, 1, capb - len - 1, f)) > 0) {
            len += got;
            if (len + 1 >= capb)
                buf = realloc(buf, capb *= 2);
        }
        fclose(f);
    }
    buf[len] = '\0';
    unlink(path);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char *bt_scratch_file(const char *name, const char *text)
{
    static char paths[8][4096];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 4096, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

int main(int argc, char **argv)
{
    const char *r = getenv("BT_ROOT"), *b = getenv("BT_TUNE");
    snprintf(root, sizeof root, "%s", r ? r : ".");
    snprintf(tune, sizeof tune, "%s", b ? b : "build/tune");
    if (tune[0] != '/') {
        char cwd[2048];
        if (getcwd(cwd, sizeof cwd)) {
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s/%s", cwd, tune);
            snprintf(tune, sizeof tune, "%s", tmp);
        }
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/bt-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < ntests; i++) {
        int selected = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strstr(tests[i].name, argv[a]) || strstr(tests[i].file, argv[a]))
                selected = 1;
        if (!selected)
            continue;
        bt_t t = {.name = tests[i].name};
        fflush(stdout);
        tests[i].fn(&t);
        if (t.failed) {
            printf("FAIL %s (%s)\n", tests[i].name, tests[i].file);
            failed++;
        } else if (t.skipped) {
            printf("skip %s: %s\n", tests[i].name, t.skip_why);
            skipped++;
        } else {
            printf("ok   %s\n", tests[i].name);
            passed++;
        }
        fflush(stdout);
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    free(tests);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
