#include "journal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_VERSION 2
#define STALE_HINT "(remove it or run without --resume)"

struct bt_journal {
    int fd;
    char *path;
    off_t size; /* end of the last whole line: a failed append is cut back to it */
    int nparams;
};

static const char *const res_names[BT_RES_COUNT] = {
    [BT_RES_OK] = "ok",           [BT_RES_WRONG] = "wrong",     [BT_RES_FAULT] = "fault",
    [BT_RES_TIMEOUT] = "timeout", [BT_RES_COMPILE] = "compile", [BT_RES_LAUNCH] = "launch",
    [BT_RES_PRUNED] = "pruned",
};

const char *bt_res_name(bt_res_status s)
{
    return (unsigned)s < BT_RES_COUNT ? res_names[s] : "?";
}

/* The header's fields, in the order they are written and compared. */
typedef enum { HF_STR, HF_LONG, HF_INT } hf_type;

/* label and verb word the refusal: "journal is for <label> 'x', this run <verb> 'y'". */
static const struct {
    const char *key, *label, *verb;
    hf_type type;
    size_t off;
} header_fields[] = {
    {"device", "device", "is on", HF_STR, offsetof(bt_journal_header, device)},
    {"family", "family", "uses", HF_STR, offsetof(bt_journal_header, family)},
    {"N", "N", "is for", HF_LONG, offsetof(bt_journal_header, N)},
    {"K", "K", "is for", HF_LONG, offsetof(bt_journal_header, K)},
    {"in", "input type", "uses", HF_STR, offsetof(bt_journal_header, in)},
    {"out", "output type", "uses", HF_STR, offsetof(bt_journal_header, out)},
    {"block_n", "block_n", "is for", HF_INT, offsetof(bt_journal_header, block_n)},
    {"block_k", "block_k", "is for", HF_INT, offsetof(bt_journal_header, block_k)},
    {"arch", "arch", "uses", HF_STR, offsetof(bt_journal_header, arch)},
    {"space_digest", "search space digest", "uses", HF_STR,
     offsetof(bt_journal_header, space_digest)},
    {"launch", "launch", "uses", HF_STR, offsetof(bt_journal_header, launch)},
};

#define NFIELDS (sizeof header_fields / sizeof header_fields[0])

static void oom(void)
{
    fputs("blocktune: out of memory\n", stderr);
    abort();
}

static void put(cJSON *o, const char *key, cJSON *item)
{
    if (!item || !cJSON_AddItemToObject(o, key, item))
        oom();
}

/* JSON has no NaN or infinity; a missing measurement is null. */
static cJSON *number(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* Prints o as one compact line with its newline and deletes it. */
static char *to_line(cJSON *o, size_t *len)
{
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text)
        oom();
    size_t n = strlen(text);
    char *line = bt_xmalloc(n + 2);
    memcpy(line, text, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    cJSON_free(text);
    *len = n + 1;
    return line;
}

static cJSON *new_object(void)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        oom();
    return o;
}

static char *header_line(const bt_journal_header *h, size_t *len)
{
    cJSON *o = new_object();
    put(o, "journal", cJSON_CreateString("blocktune"));
    put(o, "version", cJSON_CreateNumber(JOURNAL_VERSION));
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *p = (const char *)h + header_fields[i].off;
        const char *key = header_fields[i].key;
        switch (header_fields[i].type) {
        case HF_STR: put(o, key, cJSON_CreateString(p)); break;
        case HF_LONG: put(o, key, cJSON_CreateNumber((double)*(const long *)p)); break;
        case HF_INT: put(o, key, cJSON_CreateNumber(*(const int *)p)); break;
        }
    }
    return to_line(o, len);
}

static char *result_line(const bt_result *r, int nparams, size_t *len)
{
    cJSON *o = new_object();
    put(o, "M", cJSON_CreateNumber((double)r->M));
    put(o, "default", cJSON_CreateNumber(r->is_default ? 1 : 0));
    put(o, "cand", cJSON_CreateIntArray(r->cand.v, nparams));
    put(o, "status", cJSON_CreateString(bt_res_name(r->status)));
    put(o, "us", number(r->us));
    put(o, "rel_err", number(r->rel_err));
    put(o, "note", cJSON_CreateString(r->note));
    return to_line(o, len);
}

/* A whole number in [lo, hi] under key; 0 on success. */
static int get_whole(const cJSON *o, const char *key, double lo, double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return -1;
    *out = v->valuedouble;
    return 0;
}

/* A number, or null for a missing measurement. */
static int get_measure(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNull(v)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return -1;
    *out = v->valuedouble;
    return 0;
}

/* Checks line 1 against the run's header; err names the first field that differs. */
static int check_header(const cJSON *o, const bt_journal_header *h, const char *path, bt_err *err)
{
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(o, "journal");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(o, "version");
    if (!cJSON_IsString(tag) || strcmp(tag->valuestring, "blocktune") != 0)
        return bt_fail(err, "%s:1: not a blocktune journal " STALE_HINT, path);
    if (!cJSON_IsNumber(version))
        return bt_fail(err, "%s:1: journal header lacks \"version\"", path);
    /* any number but ours (2.5 too) is a version this blocktune does not read */
    if (version->valuedouble != JOURNAL_VERSION)
        return bt_fail(err, "%s: journal version %g, this blocktune reads version %d " STALE_HINT,
                       path, version->valuedouble, JOURNAL_VERSION);
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *key = header_fields[i].key, *label = header_fields[i].label;
        const char *verb = header_fields[i].verb;
        const char *p = (const char *)h + header_fields[i].off;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        if (header_fields[i].type == HF_STR) {
            if (!cJSON_IsString(v))
                return bt_fail(err, "%s:1: journal header lacks \"%s\"", path, key);
            if (strcmp(v->valuestring, p) != 0)
                return bt_fail(err, "%s: journal is for %s '%s', this run %s '%s' " STALE_HINT,
                               path, label, v->valuestring, verb, p);
            continue;
        }
        long want = header_fields[i].type == HF_LONG ? *(const long *)p : *(const int *)p;
        double got;
        if (get_whole(o, key, -1e15, 1e15, &got))
            return bt_fail(err, "%s:1: journal header lacks \"%s\"", path, key);
        if (got != (double)want)
            return bt_fail(err, "%s: journal is for %s=%.0f, this run %s %s=%ld " STALE_HINT,
                           path, label, got, verb, label, want);
    }
    return 0;
}

/* Fills r from one record line; -1 with err naming path:lineno and the field. */
static int parse_result(const cJSON *o, int nparams, bt_result *r, const char *path, int lineno,
                        bt_err *err)
{
    double v;
    memset(r, 0, sizeof *r);
    if (get_whole(o, "M", 1, 1e15, &v))
        return bt_fail(err, "%s:%d: \"M\" is missing or not a positive integer", path, lineno);
    r->M = (long)v;
    if (get_whole(o, "default", 0, 1, &v))
        return bt_fail(err, "%s:%d: \"default\" is missing or not 0 or 1", path, lineno);
    r->is_default = (int)v;
    const cJSON *cand = cJSON_GetObjectItemCaseSensitive(o, "cand");
    if (!cJSON_IsArray(cand) || cJSON_GetArraySize(cand) != nparams)
        return bt_fail(err, "%s:%d: \"cand\" is not an array of %d integers", path, lineno,
                       nparams);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, cand)
    {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
            fabs(x->valuedouble) > INT32_MAX)
            return bt_fail(err, "%s:%d: \"cand\" is not an array of %d integers", path, lineno,
                           nparams);
        r->cand.v[i++] = (int)x->valuedouble;
    }
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
    int s = 0;
    while (s < BT_RES_COUNT &&
           !(cJSON_IsString(status) && strcmp(status->valuestring, res_names[s]) == 0))
        s++;
    if (s == BT_RES_COUNT)
        return bt_fail(err, "%s:%d: \"status\" is missing or not a known status", path, lineno);
    r->status = (bt_res_status)s;
    if (get_measure(o, "us", &r->us))
        return bt_fail(err, "%s:%d: \"us\" is not a number", path, lineno);
    /* ok and pruned results are ranked by their time, so it must be one (1e999 parses as inf) */
    if ((r->status == BT_RES_OK || r->status == BT_RES_PRUNED) && !(isfinite(r->us) && r->us > 0))
        return bt_fail(err, "%s:%d: \"us\" is not a positive time for status \"%s\"", path, lineno,
                       res_names[r->status]);
    if (get_measure(o, "rel_err", &r->rel_err))
        return bt_fail(err, "%s:%d: \"rel_err\" is not a number", path, lineno);
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(o, "note");
    if (!cJSON_IsString(note))
        return bt_fail(err, "%s:%d: \"note\" is missing or not a string", path, lineno);
    snprintf(r->note, sizeof r->note, "%s", note->valuestring);
    return 0;
}

/* Reads the journal at j->path. On success *keep is the length of its valid lines (0: none,
 * start afresh) and the records are in *out. */
static int load(bt_journal *j, const bt_journal_header *h, bt_result **out, size_t *nout,
                off_t *keep, bt_err *err)
{
    char *data = NULL;
    size_t len, n = 0, cap = 0;
    bt_result *res = NULL;
    cJSON *o = NULL;
    int rc = -1;
    *keep = 0;
    if (bt_read_file(j->path, &data, &len, err))
        return -1;
    size_t pos = 0;
    for (int lineno = 1;; lineno++) {
        const char *line = data + pos, *nl = memchr(line, '\n', len - pos), *end;
        if (!nl)
            break; /* the last line was torn by a crash mid-write: measure it again */
        size_t linelen = (size_t)(nl - line);
        int last = (size_t)(nl - data) + 1 == len;
        o = cJSON_ParseWithLengthOpts(line, linelen, &end, 0);
        if (!o || end != nl) {
            if (last)
                break;
            bt_fail(err, "%s:%d: not valid JSON", j->path, lineno);
            goto out;
        }
        if (lineno == 1) {
            if (check_header(o, h, j->path, err))
                goto out;
        } else {
            if (n == cap)
                res = bt_xrealloc(res, sizeof *res * (cap = cap ? cap * 2 : 64));
            if (parse_result(o, j->nparams, &res[n], j->path, lineno, err))
                goto out;
            n++;
        }
        cJSON_Delete(o);
        o = NULL;
        pos = (size_t)(nl - data) + 1;
        *keep = (off_t)pos;
    }
    *out = res;
    *nout = n;
    res = NULL;
    rc = 0;
out:
    cJSON_Delete(o);
    free(res);
    free(data);
    return rc;
}

/* Writes all of buf at the end of the journal. A partial line is cut off again on failure so
 * that later appends never follow a fragment. */
static int append_line(bt_journal *j, const char *buf, size_t len, bt_err *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(j->fd, buf + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = errno, cut = ftruncate(j->fd, j->size);
            return bt_fail(err, "%s: cannot write journal: %s%s", j->path, strerror(e),
                           cut ? " (a partial line remains; --resume ignores it)" : "");
        }
        done += (size_t)w;
    }
    j->size += (off_t)len;
    return 0;
}

int bt_journal_open(const char *path, const bt_journal_header *h, int resume, bt_journal **out,
                    bt_result **prior, size_t *nprior, const struct bt_family *f, bt_err *err)
{
    bt_journal *j = bt_xcalloc(1, sizeof *j);
    bt_result *res = NULL;
    size_t nres = 0, hlen;
    char *hline = NULL;
    off_t keep = 0;
    int rc = -1;
    j->path = bt_strdup(path);
    j->nparams = f->nparams;
    j->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (j->fd < 0) {
        bt_fail(err, "%s: cannot open journal: %s", path, strerror(errno));
        goto out;
    }
    /* Two runs appending to one journal would interleave their lines. The lock must be on the
     * file that is at path once locked: a run that finished may have unlinked the one opened. */
    for (;;) {
        struct stat fst, pst;
        if (flock(j->fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK)
                bt_fail(err, "%s: journal is in use by another tune process", path);
            else
                bt_fail(err, "%s: cannot lock journal: %s", path, strerror(errno));
            goto out;
        }
        if (fstat(j->fd, &fst) == 0 && stat(path, &pst) == 0 && fst.st_dev == pst.st_dev &&
            fst.st_ino == pst.st_ino)
            break;
        close(j->fd);
        j->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (j->fd < 0) {
            bt_fail(err, "%s: cannot open journal: %s", path, strerror(errno));
            goto out;
        }
    }
    if (resume && load(j, h, &res, &nres, &keep, err))
        goto out;
    if (ftruncate(j->fd, keep) != 0) {
        bt_fail(err, "%s: cannot truncate journal: %s", path, strerror(errno));
        goto out;
    }
    j->size = keep;
    if (keep == 0) {
        hline = header_line(h, &hlen);
        if (append_line(j, hline, hlen, err)) {
            unlink(path); /* (empty, and locked by this run: nothing to resume from) */
            goto out;
        }
    }
    rc = 0;
out:
    free(hline);
    if (rc != 0) {
        free(res);
        res = NULL, nres = 0;
        bt_journal_close(j, 0);
        j = NULL;
    }
    *out = j;
    if (prior)
        *prior = res;
    else
        free(res);
    if (nprior)
        *nprior = nres;
    return rc;
}

int bt_journal_append(bt_journal *j, const bt_result *r, bt_err *err)
{
    size_t len;
    char *line = result_line(r, j->nparams, &len);
    int rc = append_line(j, line, len, err);
    free(line);
    return rc;
}

void bt_journal_close(bt_journal *j, int remove)
{
    if (!j)
        return;
    if (j->fd >= 0) {
        /* Unlink before close so no other run can take the lock on a file about to vanish. */
        if (remove)
            unlink(j->path);
        else
            fdatasync(j->fd);
        close(j->fd);
    }
    free(j->path);
    free(j);
}
