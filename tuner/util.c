#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int bt_fail(bt_err *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int bt_wrap(bt_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[BT_ERRMAX], old[BT_ERRMAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}

int bt_append(bt_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    size_t used = strlen(err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + used, sizeof err->msg - used, fmt, ap);
    va_end(ap);
    return -1;
}

void *bt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("blocktune: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *bt_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fputs("blocktune: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *bt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("blocktune: out of memory\n", stderr);
        abort();
    }
    return q;
}

char *bt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(bt_xmalloc(n), s, n);
}

int bt_sprintf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return (r < 0 || (size_t)r >= n) ? -1 : 0;
}

int bt_read_file(const char *path, char **out, size_t *len, bt_err *err)
{
    int rc = -1;
    char *data = NULL;
    FILE *f = NULL;
    struct stat st;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer before fstat can refuse it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return bt_fail(err, "%s: cannot open: %s", path, strerror(errno));
    /* /dev/zero, a pipe or a huge file would be read until memory runs out */
    if (fstat(fd, &st) != 0)
        bt_fail(err, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        bt_fail(err, "%s: is a directory, not a file", path);
    else if (!S_ISREG(st.st_mode))
        bt_fail(err, "%s: not a regular file", path);
    else if (st.st_size > BT_READ_MAX)
        bt_fail(err, "%s: too large (%lld bytes, at most %ld MiB)", path, (long long)st.st_size,
                BT_READ_MAX >> 20);
    else if (fcntl(fd, F_SETFL, 0) != 0 || !(f = fdopen(fd, "rb")))
        bt_fail(err, "%s: cannot open: %s", path, strerror(errno));
    if (!f)
        goto out;
    size_t cap = 4096, n = 0;
    data = bt_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap)
            data = bt_xrealloc(data, cap *= 2);
        size_t got = fread(data + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
        /* it may have grown since fstat */
        if (n > (size_t)BT_READ_MAX) {
            bt_fail(err, "%s: too large (over %ld MiB)", path, BT_READ_MAX >> 20);
            goto out;
        }
    }
    if (ferror(f)) {
        bt_fail(err, "%s: read error: %s", path, strerror(errno));
        goto out;
    }
    data[n] = '\0';
    *out = data;
    data = NULL;
    if (len)
        *len = n;
    rc = 0;
out:
    free(data);
    if (f)
        fclose(f);
    else
        close(fd);
    return rc;
}

void bt_one_line(char *dst, size_t n, const char *src)
{
    size_t used = 0;
    int space = 0;
    for (; *src && used + 1 < n; src++) {
        if (isspace((unsigned char)*src)) {
            space = used > 0;
            continue;
        }
        if (space) {
            if (used + 2 >= n)
                break;
            dst[used++] = ' ';
            space = 0;
        }
        dst[used++] = *src;
    }
    dst[used] = '\0';
}

int bt_write_file_atomic(const char *path, const void *data, size_t len, bt_err *err)
{
    char tmp[4096];
    /* A fresh temporary per writer (mkstemp creates it exclusively): threads of one process
     * may publish the same entry at once, and a shared one could be renamed away or truncated
     * under the other. */
    if (bt_sprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path))
        return bt_fail(err, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return bt_fail(err, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
    /* mkstemp makes it 0600; the published file is readable as before. */
    if (fchmod(fd, 0644) != 0) {
        bt_fail(err, "%s: chmod failed: %s", path, strerror(errno));
        goto fail;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            bt_fail(err, "%s: write failed: %s", path, strerror(errno));
            goto fail;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        bt_fail(err, "%s: fsync failed: %s", path, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        bt_fail(err, "%s: close failed: %s", path, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        bt_fail(err, "%s: rename failed: %s", path, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return -1;
}

int bt_mkdirs(const char *path, bt_err *err)
{
    char buf[4096];
    if (bt_sprintf(buf, sizeof buf, "%s", path))
        return bt_fail(err, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        char c = *p;
        if (c == '/' || c == '\0') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return bt_fail(err, "%s: cannot create directory: %s", buf, strerror(errno));
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
                return bt_fail(err, "%s: not a directory", buf);
            *p = c;
        }
        if (c == '\0')
            break;
    }
    return 0;
}

/* Whether a file can be created in the existing directory dir: by creating and removing one
 * (access() takes no account of read-only mounts). */
static int probe_writable(const char *dir, bt_err *err)
{
    char probe[4096];
    if (bt_sprintf(probe, sizeof probe, "%s/.blocktune-probe.%ld", dir, (long)getpid()))
        return bt_fail(err, "%s: path too long", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return bt_fail(err, "%s: directory is not writable: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

int bt_check_writable_dir(const char *dir, bt_err *err)
{
    if (bt_mkdirs(dir, err))
        return -1;
    return probe_writable(dir, err);
}

int bt_check_dir_creatable(const char *dir, bt_err *err)
{
    char p[4096];
    if (bt_sprintf(p, sizeof p, "%s", dir))
        return bt_fail(err, "%s: path too long", dir);
    for (;;) {
        for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--) /* "a/b/" is "a/b" */
            p[n - 1] = '\0';
        struct stat st;
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return bt_fail(err, "%s: not a directory", p);
            return probe_writable(p, err);
        }
        if (errno != ENOENT)
            return bt_fail(err, "%s: %s", p, strerror(errno));
        /* missing: the directory above it must take the new one */
        char *slash = strrchr(p, '/');
        if (!slash)
            strcpy(p, ".");
        else if (slash == p)
            p[1] = '\0'; /* "/x": the root */
        else
            *slash = '\0';
    }
}

int bt_parse_long(const char *s, long min, long max, long *out)
{
    /* digits, with a minus sign at most: strtol alone would take " 5" and "+5" */
    if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int bt_is_comma_list(const char *s)
{
    return *s && s[0] != ',' && s[strlen(s) - 1] != ',' && !strstr(s, ",,");
}

int bt_parse_int_list(const char *s, long max, long **out, int *n, bt_err *err)
{
    int rc = -1, cnt = 0;
    long *vals = NULL;
    char *copy = bt_strdup(s), *save = NULL;
    if (!bt_is_comma_list(s)) {
        bt_fail(err, "'%s' is not a comma-separated list of positive integers", s);
        goto out;
    }
    vals = bt_xmalloc(sizeof *vals * (strlen(s) / 2 + 1));
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (bt_parse_long(tok, 1, max, &v)) {
            /* digits only, so not a number at all or beyond max (strtol's ERANGE included) */
            if (strspn(tok, "0123456789") == strlen(tok) && strspn(tok, "0") != strlen(tok))
                bt_fail(err, "'%s' is too large (at most %ld)", tok, max);
            else
                bt_fail(err, "'%s' is not a positive integer (at most %ld)", tok, max);
            goto out;
        }
        vals[cnt++] = v;
    }
    qsort(vals, (size_t)cnt, sizeof *vals, cmp_long);
    int uniq = 0;
    for (int i = 0; i < cnt; i++)
        if (uniq == 0 || vals[uniq - 1] != vals[i])
            vals[uniq++] = vals[i];
    *out = vals;
    *n = uniq;
    vals = NULL;
    rc = 0;
out:
    free(vals);
    free(copy);
    return rc;
}

int bt_is_pow2(long v) { return v > 0 && (v & (v - 1)) == 0; }

double bt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bt_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* SHA-256 per FIPS 180-4. */
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(bt_sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
    s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

void bt_sha256_init(bt_sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->nbuf = 0;
}

void bt_sha256_update(bt_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->len += n;
    while (n > 0) {
        size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take, p += take, n -= take;
        if (s->nbuf == 64) {
            sha_block(s, s->buf);
            s->nbuf = 0;
        }
    }
}

void bt_sha256_hex(bt_sha256 *s, char out[65])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, len[8];
    bt_sha256_update(s, &pad, 1);
    while (s->nbuf != 56)
        bt_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    bt_sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}
