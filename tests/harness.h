/* A minimal test harness: TEST() registers a function; CHECK* record failures and go on;
 * SKIP() marks a test skipped (GPU tests without a GPU), never passed. */
#ifndef BT_HARNESS_H
#define BT_HARNESS_H

#include <stdio.h>
#include <string.h>

typedef struct bt_t {
    const char *name;
    int failed;
    int skipped;
    char skip_why[256];
} bt_t;

typedef void (*bt_test_fn)(bt_t *t);
void bt_test_register(const char *name, const char *file, bt_test_fn fn);

#define TEST(name)                                                                             \
    static void name(bt_t *t);                                                                 \
    __attribute__((constructor)) static void bt_reg_##name(void)                               \
    {                                                                                          \
        bt_test_register(#name, __FILE__, name);                                               \
    }                                                                                          \
    static void name(bt_t *t)

void bt_check_fail(bt_t *t, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            bt_check_fail(t, __FILE__, __LINE__, "CHECK(%s)", #cond);                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                         \
    do {                                                                                       \
        long long bt_a_ = (long long)(a), bt_b_ = (long long)(b);                              \
        if (bt_a_ != bt_b_)                                                                    \
            bt_check_fail(t, __FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, bt_a_,      \
                          bt_b_);                                                              \
    } while (0)

#define CHECK_STREQ(a, b)                                                                      \
    do {                                                                                       \
        const char *bt_a_ = (a), *bt_b_ = (b);                                                 \
        if (!bt_a_ || !bt_b_ || strcmp(bt_a_, bt_b_) != 0)                                     \
            bt_check_fail(t, __FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,         \
                          bt_a_ ? bt_a_ : "(null)", bt_b_ ? bt_b_ : "(null)");                 \
    } while (0)

/* Checks that haystack contains needle (error messages). */
#define CHECK_CONTAINS(hay, needle)                                                            \
    do {                                                                                       \
        const char *bt_h_ = (hay), *bt_n_ = (needle);                                          \
        if (!bt_h_ || !strstr(bt_h_, bt_n_))                                                   \
            bt_check_fail(t, __FILE__, __LINE__, "\"%s\" does not contain \"%s\"",             \
                          bt_h_ ? bt_h_ : "(null)", bt_n_);                                    \
    } while (0)

#define SKIP(...)                                                                              \
    do {                                                                                       \
        t->skipped = 1;                                                                        \
        snprintf(t->skip_why, sizeof t->skip_why, __VA_ARGS__);                                \
        return;                                                                                \
    } while (0)

/* Paths the tests need, resolved from the environment by the runner. */
const char *bt_test_root(void);    /* repository root */
const char *bt_test_tune(void);    /* the tune binary under test */
/* The stand-in CUDA driver the build puts beside tune (tests/fakecuda) into fake; 0 when it is there. */
int bt_test_fake_driver(char *fake, size_t n);
const char *bt_test_tmpdir(void);  /* a fresh scratch directory for this run */

/* Sets environment variable name to value (NULL: unsets it) and returns its old value for
 * bt_test_restore_env (NULL when it was unset). */
char *bt_test_set_env(const char *name, const char *value);
/* Puts back what bt_test_set_env returned, and frees it. */
void bt_test_restore_env(const char *name, char *old);

/* Runs the tune binary with args (NULL-terminated), capturing stdout+stderr into *out
 * (caller frees). Returns the exit status, or -1 when it did not exit normally. */
int bt_run_tune(char **out, const char *const *args);

/* Writes text to a file under the scratch directory and returns its path (static buffer
 * rotation: valid until 8 more calls). */
const char *bt_scratch_file(const char *name, const char *text);

#endif
