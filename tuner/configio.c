#include "configio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int bt_config_filename(char *buf, size_t n, const bt_family *f, long N, long K,
                       const char *device_name, bt_in_type in, int block_n, int block_k,
                       bt_format fmt)
{
    char dev[256], kernel[64] = "";
    if (bt_sprintf(dev, sizeof dev, "%s", device_name))
        return -1;
    for (char *p = dev; *p; p++)
        if (*p == ' ')
            *p = '_';
    if (strcmp(f->name, "classic") != 0 &&
        bt_sprintf(kernel, sizeof kernel, ",kernel=%s", f->name))
        return -1;
    /* vLLM's fp8 loader drops the space after the comma; its int8 loader keeps it. */
    int space = !(fmt == BT_FMT_VLLM && in == BT_IN_FP8);
    return bt_sprintf(buf, n, "N=%ld,K=%ld,device_name=%s,dtype=%s,block_shape=[%d,%s%d]%s.json",
                      N, K, dev, bt_dtype_tag(in), block_n, space ? " " : "", block_k, kernel);
}

void bt_config_free(bt_config *c)
{
    free(c->e);
    c->e = NULL;
    c->n = 0;
}

void bt_config_set(bt_config *c, long batch, const bt_cand *cand)
{
    int i = 0;
    while (i < c->n && c->e[i].batch < batch)
        i++;
    if (i < c->n && c->e[i].batch == batch) {
        c->e[i].cand = *cand;
        return;
    }
    c->e = bt_xrealloc(c->e, sizeof *c->e * (size_t)(c->n + 1));
    memmove(c->e + i + 1, c->e + i, sizeof *c->e * (size_t)(c->n - i));
    c->e[i].batch = batch;
    c->e[i].cand = *cand;
    c->n++;
}

/* Entries ascend, so keeping the first of equally near ones picks the smaller batch, as
 * SGLang's min(keys, key=lambda x: abs(x - M)) does. */
const bt_config_entry *bt_config_nearest(const bt_config *c, long M)
{
    const bt_config_entry *best = NULL;
    for (int i = 0; i < c->n; i++)
        if (!best || labs(c->e[i].batch - M) < labs(best->batch - M))
            best = &c->e[i];
    return best;
}

const long bt_sglang_batches[BT_SGLANG_BATCHES] = {1,   2,   4,   8,    16,   24,   32,   48,   64,
                                                    96,  128, 256, 512, 1024, 1536, 2048, 3072, 4096};

int bt_config_moves(const bt_config *before, const bt_config *update, bt_config_move *out)
{
    int n = 0;
    if (before->n == 0)
        return 0; /* a new file: nothing ran before */
    bt_config after = {0};
    for (int i = 0; i < before->n; i++)
        bt_config_set(&after, before->e[i].batch, &before->e[i].cand);
    for (int i = 0; i < update->n; i++)
        bt_config_set(&after, update->e[i].batch, &update->e[i].cand);
    for (int i = 0; i < BT_SGLANG_BATCHES; i++) {
        const long M = bt_sglang_batches[i];
        const bt_config_entry *was = bt_config_nearest(before, M), *now = bt_config_nearest(&after, M);
        int tuned = 0;
        for (int j = 0; j < update->n; j++)
            tuned |= update->e[j].batch == M;
        if (!tuned && was->batch != now->batch && memcmp(&was->cand, &now->cand, sizeof was->cand) != 0)
            out[n++] = (bt_config_move){M, was->batch, now->batch};
    }
    bt_config_free(&after);
    return n;
}

int bt_sidecar_path(char *buf, size_t n, const char *config_path)
{
    size_t len = strlen(config_path);
    if (len >= 5 && strcmp(config_path + len - 5, ".json") == 0)
        len -= 5;
    if (len > INT_MAX)
        return -1;
    return bt_sprintf(buf, n, "%.*s.provenance.json", (int)len, config_path);
}

/* ---- reading ---- */

/* The 1-based line and column of end in text. */
static void line_col(const char *text, const char *end, int *line, int *col)
{
    *line = 1, *col = 1;
    for (const char *p = text; end && p < end && *p; p++) {
        if (*p == '\n')
            ++*line, *col = 1;
        else
            ++*col;
    }
}

const char *bt_json_duplicate_key(const cJSON *v)
{
    for (const cJSON *a = v ? v->child : NULL; a; a = a->next) {
        if (cJSON_IsObject(v))
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && strcmp(a->string, b->string) == 0)
                    return a->string;
        const char *d = bt_json_duplicate_key(a);
        if (d)
            return d;
    }
    return NULL;
}

struct cJSON *bt_json_read(const char *path, bt_err *err)
{
    char *text = NULL;
    size_t len;
    int line, col;
    if (bt_read_file(path, &text, &len, err))
        return NULL;
    /* cJSON stops at a NUL byte: what follows one would be dropped unread (and unwritten, by a
     * merge that writes the file back). */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        line_col(text, nul, &line, &col);
        bt_fail(err, "%s:%d:%d: not valid JSON (a NUL byte)", path, line, col);
        free(text);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        line_col(text, end, &line, &col);
        bt_fail(err, "%s:%d:%d: not valid JSON", path, line, col);
    }
    free(text);
    return root;
}

/* Python's int(key) would take " 16" or "+16"; neither comes from a tuner, so only digits. */
static int parse_batch(const char *s, long *out)
{
    if (!*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    return bt_parse_long(s, 1, LONG_MAX, out);
}

/* A key the file holds as a JSON string, quotes included, \n, \t and \" escaped, so that one
 * with a newline or another control character stays on the error's one line (cJSON_free it;
 * NULL when out of memory). */
static char *json_quote(const char *key)
{
    cJSON *s = cJSON_CreateString(key);
    char *q = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    return q;
}

static int read_entry(const char *path, const cJSON *entry, const bt_family *f, bt_cand *cand,
                      bt_err *err)
{
    const char *b = entry->string;
    int seen[BT_MAXPARAM] = {0};
    if (!cJSON_IsObject(entry))
        return bt_fail(err, "%s: \"%s\": expected an object of %s kernel parameters", path, b,
                       f->name);
    memset(cand, 0, sizeof *cand);
    const cJSON *p;
    cJSON_ArrayForEach(p, entry) {
        int i = bt_family_param_index(f, p->string);
        if (i < 0) { /* (b is digits: parse_batch took it) */
            char *q = json_quote(p->string);
            bt_fail(err, "%s: \"%s\": unexpected key %s (not a %s kernel parameter)", path, b,
                    q ? q : "\"?\"", f->name);
            cJSON_free(q);
            return -1;
        }
        if (seen[i])
            return bt_fail(err, "%s: \"%s\": %s appears twice", path, b, p->string);
        double d = p->valuedouble;
        /* cJSON reads every number as a double; a config holds only whole ints. */
        if (!cJSON_IsNumber(p) || !(d >= INT_MIN && d <= INT_MAX) || d != (double)(int)d) {
            char *txt = cJSON_PrintUnformatted(p);
            bt_fail(err, "%s: \"%s\": %s: %.40s is not an integer", path, b, p->string,
                    txt ? txt : "value");
            cJSON_free(txt);
            return -1;
        }
        /* a value no tuner writes (BLOCK_SIZE_K 0) would reach the library's checks */
        char why[80];
        if (bt_param_refuse(&f->params[i], (long)d, why, sizeof why))
            return bt_fail(err, "%s: \"%s\": %s: %s", path, b, p->string, why);
        cand->v[i] = (int)d;
        seen[i] = 1;
    }
    for (int i = 0; i < f->nparams; i++) {
        if (!seen[i] && f->params[i].optional)
            cand->v[i] = f->params[i].dflt;
        else if (!seen[i])
            return bt_fail(err, "%s: \"%s\": missing %s", path, b, f->params[i].key);
    }
    return 0;
}

/* An entry read, with its place in the file (for which of two equal batch sizes to name). */
typedef struct {
    bt_config_entry e;
    int pos;
    const char *key;
} read_entry_pos;

static int cmp_entry_pos(const void *a, const void *b)
{
    const read_entry_pos *x = a, *y = b;
    if (x->e.batch != y->e.batch)
        return x->e.batch < y->e.batch ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Entries are collected and sorted once, not inserted one by one: a file of many entries (up
 * to BT_READ_MAX) reads in O(n log n), not O(n^2). */
int bt_config_read(const char *path, const bt_family *f, bt_config *out, bt_err *err)
{
    int rc = -1, n = 0, cap = 0;
    cJSON *root = NULL;
    read_entry_pos *v = NULL;
    if (!(root = bt_json_read(path, err)))
        return -1;
    if (!cJSON_IsObject(root)) {
        bt_fail(err, "%s: expected an object mapping batch sizes to kernel parameters", path);
        goto out;
    }
    const cJSON *entry;
    cJSON_ArrayForEach(entry, root) {
        long batch;
        bt_cand cand;
        if (parse_batch(entry->string, &batch)) {
            char *q = json_quote(entry->string);
            bt_fail(err, "%s: %s: a key must be a batch size (a positive integer)", path,
                    q ? q : "\"?\"");
            cJSON_free(q);
            goto out;
        }
        if (read_entry(path, entry, f, &cand, err))
            goto out;
        if (n == cap)
            v = bt_xrealloc(v, sizeof *v * (size_t)(cap = cap ? cap * 2 : 16));
        v[n] = (read_entry_pos){{batch, cand}, n, entry->string};
        n++;
    }
    if (n > 0)
        qsort(v, (size_t)n, sizeof *v, cmp_entry_pos);
    /* Of batch sizes that appear twice, name the repeat that comes first in the file (equal
     * batch sizes are sorted in file order, so each v[i] equal to v[i - 1] is a repeat). */
    const read_entry_pos *dup = NULL;
    for (int i = 1; i < n; i++)
        if (v[i].e.batch == v[i - 1].e.batch && (!dup || v[i].pos < dup->pos))
            dup = &v[i];
    if (dup) {
        bt_fail(err, "%s: \"%s\": batch size %ld appears twice", path, dup->key, dup->e.batch);
        goto out;
    }
    out->e = n ? bt_xmalloc(sizeof *out->e * (size_t)n) : NULL;
    out->n = n;
    for (int i = 0; i < n; i++)
        out->e[i] = v[i].e;
    rc = 0;
out:
    free(v);
    cJSON_Delete(root);
    return rc;
}

/* ---- writing ---- */

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = bt_xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

static void sb_long(sbuf *b, long v)
{
    char num[24];
    snprintf(num, sizeof num, "%ld", v);
    sb_put(b, num);
}

/* json.dumps(indent=4): ",\n" between items, ": " after keys, "{}" for an empty object. */
char *bt_config_serialize(const bt_config *c, const bt_family *f)
{
    sbuf b = {0};
    if (c->n == 0) {
        sb_put(&b, "{}\n");
        return b.p;
    }
    sb_put(&b, "{\n");
    for (int i = 0; i < c->n; i++) {
        sb_put(&b, "    \"");
        sb_long(&b, c->e[i].batch);
        sb_put(&b, "\": {\n");
        const char *sep = "";
        for (int j = 0; j < f->nparams; j++) {
            if (bt_param_omitted(f, &c->e[i].cand, j))
                continue;
            sb_put(&b, sep);
            sb_put(&b, "        \"");
            sb_put(&b, f->params[j].key);
            sb_put(&b, "\": ");
            sb_long(&b, c->e[i].cand.v[j]);
            sep = ",\n";
        }
        sb_put(&b, "\n");
        sb_put(&b, i + 1 < c->n ? "    },\n" : "    }\n");
    }
    sb_put(&b, "}\n");
    return b.p;
}

/* Serializes read-merge-write cycles on one directory. The lock is on the directory: a lock
 * file would be left behind, and a lock on the config would go with the inode the rename
 * replaces. Where a filesystem refuses flock on directories (NFS), writes go unlocked; the
 * rename still keeps every file whole. */
static int lock_dir(const char *path, int *fd, bt_err *err)
{
    char dir[4096] = ".";
    const char *slash = strrchr(path, '/');
    if (slash && bt_sprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path))
        return bt_fail(err, "%s: path too long", path);
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0)
        return bt_fail(err, "%s: cannot open directory: %s", dir, strerror(errno));
    while (flock(*fd, LOCK_EX) != 0 && errno == EINTR)
        ;
    return 0;
}

static int left_as_is(bt_err *err) { return bt_append(err, " (existing file left as is)"); }

int bt_config_merge_write(const char *path, const bt_family *f, const bt_config *update,
                          bt_config *before, bt_err *err)
{
    int rc = -1, lock_fd = -1;
    char *text = NULL;
    bt_config merged = {0};
    struct stat st;
    if (lock_dir(path, &lock_fd, err))
        return -1;
    if (stat(path, &st) == 0) {
        if (bt_config_read(path, f, &merged, err)) {
            left_as_is(err);
            goto out;
        }
    } else if (errno != ENOENT) {
        bt_fail(err, "%s: cannot stat: %s", path, strerror(errno));
        goto out;
    }
    if (before)
        for (int i = 0; i < merged.n; i++)
            bt_config_set(before, merged.e[i].batch, &merged.e[i].cand);
    for (int i = 0; i < update->n; i++)
        bt_config_set(&merged, update->e[i].batch, &update->e[i].cand);
    text = bt_config_serialize(&merged, f);
    rc = bt_write_file_atomic(path, text, strlen(text), err);
out:
    free(text);
    bt_config_free(&merged);
    close(lock_fd); /* releases the lock */
    return rc;
}

/* An existing sidecar, which must be {"runs": [...]}, into *root (NULL when there is none). */
static int read_sidecar(const char *path, cJSON **root, bt_err *err)
{
    struct stat st;
    *root = NULL;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return bt_fail(err, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!(*root = bt_json_read(path, err)))
        return left_as_is(err);
    if (!cJSON_IsObject(*root) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(*root, "runs"))) {
        cJSON_Delete(*root);
        *root = NULL;
        bt_fail(err, "%s: expected an object with a \"runs\" list", path);
        return left_as_is(err);
    }
    return 0;
}

int bt_outputs_check(const char *config_path, const bt_family *f, bt_err *err)
{
    char path[4096];
    struct stat st;
    cJSON *root = NULL;
    if (stat(config_path, &st) == 0) {
        bt_config c = {0};
        int rc = bt_config_read(config_path, f, &c, err);
        bt_config_free(&c);
        if (rc)
            return left_as_is(err);
    }
    if (bt_sidecar_path(path, sizeof path, config_path))
        return bt_fail(err, "%s: path too long", config_path);
    int rc = read_sidecar(path, &root, err);
    cJSON_Delete(root);
    return rc;
}

int bt_sidecar_append(const char *config_path, cJSON *run, bt_err *err)
{
    int rc = -1, lock_fd = -1;
    char path[4096], *text = NULL, *withnl = NULL;
    cJSON *root = NULL, *runs;
    if (bt_sidecar_path(path, sizeof path, config_path)) {
        bt_fail(err, "%s: path too long", config_path);
        goto out;
    }
    if (lock_dir(path, &lock_fd, err) || read_sidecar(path, &root, err))
        goto out;
    if (!root) {
        root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "runs", cJSON_CreateArray());
    }
    runs = cJSON_GetObjectItemCaseSensitive(root, "runs");
    cJSON_AddItemToArray(runs, run);
    run = NULL;
    if (!(text = cJSON_Print(root))) {
        bt_fail(err, "%s: out of memory", path);
        goto out;
    }
    size_t len = strlen(text);
    withnl = bt_xmalloc(len + 2);
    memcpy(withnl, text, len);
    withnl[len] = '\n', withnl[len + 1] = '\0';
    rc = bt_write_file_atomic(path, withnl, len + 1, err);
out:
    cJSON_Delete(run);
    cJSON_Delete(root);
    free(withnl);
    free(text);
    if (lock_fd >= 0)
        close(lock_fd); /* releases the lock */
    return rc;
}
