/* Small shared helpers: the error type every module fills, file I/O that never leaves a
 * half-written file, and string/number parsing with range checks. */
#ifndef BT_UTIL_H
#define BT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define BT_ERRMAX 2048

/* Every fallible function returns 0 on success, -1 on failure, and fills the caller's bt_err
 * with one line (no trailing newline) that names the file/line/field or flag at fault. */
typedef struct {
    char msg[BT_ERRMAX];
} bt_err;

/* Formats into err (may be NULL) and returns -1, so callers can `return bt_fail(...)`. */
int bt_fail(bt_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message: "context: old message". Returns -1. */
int bt_wrap(bt_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends to an existing message: "old message" then the formatted text. Returns -1. */
int bt_append(bt_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The largest file bt_read_file reads: far above any search space, config, journal or cubin. */
#define BT_READ_MAX (64L << 20)

/* Reads a whole regular file of at most BT_READ_MAX bytes; *out is NUL-terminated and owned
 * by the caller. Directories, devices, pipes and larger files are refused. */
int bt_read_file(const char *path, char **out, size_t *len, bt_err *err);

/* Writes data to path through a temporary file in the same directory, fsync, rename:
 * readers see the old file or the new one, never a partial one. */
int bt_write_file_atomic(const char *path, const void *data, size_t len, bt_err *err);

/* mkdir -p. */
int bt_mkdirs(const char *path, bt_err *err);

/* Creates dir if missing and checks that a file can be created in it. */
int bt_check_writable_dir(const char *dir, bt_err *err);

/* What bt_check_writable_dir checks, creating nothing: dir is a writable directory, or it is
 * missing and the nearest existing directory on its path is writable. */
int bt_check_dir_creatable(const char *dir, bt_err *err);

/* Parses a whole decimal integer in [min, max]; 0 on success. */
int bt_parse_long(const char *s, long min, long max, long *out);

/* Whether s is a comma-separated list with no empty item (strtok_r would pass over one). */
int bt_is_comma_list(const char *s);

/* Parses "1,2,4" into a sorted, de-duplicated array of positive integers (caller frees). */
int bt_parse_int_list(const char *s, long max, long **out, int *n, bt_err *err);

int bt_is_pow2(long v);

/* snprintf that reports truncation as failure. */
int bt_sprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* src with each run of whitespace (newlines and tabs too) made one space and the ends trimmed,
 * truncated to fit dst (n > 0): a multi-line log quoted in a one-line message. */
void bt_one_line(char *dst, size_t n, const char *src);

/* strdup that aborts on out-of-memory (allocation failure is not a recoverable state here). */
char *bt_strdup(const char *s);
void *bt_xmalloc(size_t n);
void *bt_xcalloc(size_t n, size_t size);
void *bt_xrealloc(void *p, size_t n);

/* Monotonic wall clock in seconds. */
double bt_now(void);

/* The median of v[0..n) (n > 0), which is left sorted ascending. */
double bt_median(double *v, int n);

/* SHA-256 of data, as 64 lowercase hex chars + NUL. Used for cache keys. */
typedef struct {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} bt_sha256;
void bt_sha256_init(bt_sha256 *s);
void bt_sha256_update(bt_sha256 *s, const void *data, size_t n);
void bt_sha256_hex(bt_sha256 *s, char out[65]);

#endif
