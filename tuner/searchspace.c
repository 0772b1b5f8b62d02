#include "searchspace.h"
#include "shapes.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* What every check needs to name the place at fault. */
typedef struct {
    const char *path;
    yaml_document_t *doc;
    bt_err *err;
} ctx;

enum { K_NAME, K_DESCRIPTION, K_FAMILY, K_BATCH, K_PARAMS, K_CONSTRAINTS, K_COUNT };
static const char *const top_keys[K_COUNT] = {
    "name", "description", "family", "batch_sizes", "parameters", "constraints",
};

static const struct {
    const char *name;
    bt_constraint_kind kind;
    int min, max; /* operand count */
} con_kinds[] = {
    {"divides", BT_CON_DIVIDES, 2, 2},
    {"at_most", BT_CON_AT_MOST, 2, 2},
    {"product_at_most", BT_CON_PRODUCT_AT_MOST, 3, BT_MAXOPERANDS},
};
#define NCON_KINDS ((int)(sizeof con_kinds / sizeof con_kinds[0]))

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }
static int col_of(const yaml_node_t *n) { return (int)n->start_mark.column + 1; }

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static yaml_node_t *node(const ctx *c, int id) { return yaml_document_get_node(c->doc, id); }

static int fail_at(const ctx *c, const yaml_node_t *n, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(const ctx *c, const yaml_node_t *n, const char *field, const char *fmt, ...)
{
    char msg[BT_ERRMAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bt_fail(c->err, "%s:%d:%d: %s: %s", c->path, line_of(n), col_of(n), field, msg);
}

/* Text from the file, shortened and kept on one line, for quoting in a message. */
static const char *clip(const char *s, char buf[48])
{
    size_t n = 0;
    for (; s[n] && n < 40; n++)
        buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    if (s[n]) {
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) /* don't split a UTF-8 character */
            n--;
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

static int is_null(const yaml_node_t *n)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp(scalar(n), nulls[i]) == 0)
            return 1;
    return 0;
}

/* "a list", "a map", "an empty value" or the scalar quoted, for "expected X, found Y". */
static const char *describe(const yaml_node_t *n, char buf[64])
{
    char cl[48];
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    if (n->type == YAML_MAPPING_NODE)
        return "a map";
    if (is_null(n))
        return "an empty value";
    snprintf(buf, 64, "\"%s\"", clip(scalar(n), cl));
    return buf;
}

/* A non-empty string on one line, or NULL with err filled: the name is printed in a run's
 * header, where a line break or an escape sequence would garble the output. */
static const char *get_string(const ctx *c, const yaml_node_t *n, const char *field)
{
    char what[64], cl[48];
    if (n->type != YAML_SCALAR_NODE || is_null(n) || n->data.scalar.length == 0) {
        fail_at(c, n, field, "expected a non-empty string, found %s", describe(n, what));
        return NULL;
    }
    for (const char *p = scalar(n); *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            fail_at(c, n, field, "\"%s\" has a line break or control character", clip(scalar(n), cl));
            return NULL;
        }
    }
    return scalar(n);
}

/* Integers are plain decimal scalars. YAML 1.1 would also read 0x10, 010 (octal), 1_000 and
 * 1e3 as numbers, and other tools disagree on them; a quoted "16" is a string. */
static int get_int(const ctx *c, const yaml_node_t *n, const char *field, long *out)
{
    char what[64], cl[48];
    if (n->type != YAML_SCALAR_NODE || is_null(n))
        return fail_at(c, n, field, "expected an integer, found %s", describe(n, what));
    const char *s = scalar(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return fail_at(c, n, field, "\"%s\" is quoted, write integers without quotes",
                       clip(s, cl));
    /* a minus sign at most: bt_parse_long, like the command line, refuses "+64" */
    const char *digits = s + (*s == '-');
    size_t nd = strspn(digits, "0123456789");
    if (nd == 0 || digits[nd] != '\0')
        return fail_at(c, n, field, "\"%s\" is not an integer", clip(s, cl));
    if (digits[0] == '0' && nd > 1)
        return fail_at(c, n, field, "\"%s\" has a leading zero (YAML 1.1 reads it as octal)",
                       clip(s, cl));
    if (bt_parse_long(s, LONG_MIN, LONG_MAX, out))
        return fail_at(c, n, field, "%s is out of range", clip(s, cl));
    return 0;
}

/* A positive integer (non-negative for a parameter whose range starts at 0); def (may be NULL)
 * adds the parameter's range and power-of-two rule. */
static int get_value(const ctx *c, const yaml_node_t *n, const char *field,
                     const bt_param_def *def, long *out)
{
    long v;
    char why[80];
    if (get_int(c, n, field, &v))
        return -1;
    if (def && bt_param_refuse(def, v, why, sizeof why))
        return fail_at(c, n, field, "%s", why);
    if (!def && v <= 0)
        return fail_at(c, n, field, "%ld is not positive", v);
    if (!def && v > INT_MAX)
        return fail_at(c, n, field, "%ld is too large (at most %d)", v, INT_MAX);
    *out = v;
    return 0;
}

/* A non-empty list of distinct values in file order; *pos may be NULL. */
static int get_value_list(const ctx *c, const yaml_node_t *n, const char *field,
                          const bt_param_def *def, long **vals, bt_srcpos **pos, int *count)
{
    char what[64];
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(c, n, field, "expected a list of integers, found %s", describe(n, what));
    const yaml_node_item_t *items = n->data.sequence.items.start;
    int cnt = (int)(n->data.sequence.items.top - items);
    if (cnt == 0)
        return fail_at(c, n, field, "the list is empty");
    long *v = bt_xmalloc(sizeof *v * (size_t)cnt);
    for (int i = 0; i < cnt; i++) {
        const yaml_node_t *item = node(c, items[i]);
        if (get_value(c, item, field, def, &v[i]))
            goto fail;
        for (int j = 0; j < i; j++) {
            if (v[j] == v[i]) {
                const yaml_node_t *first = node(c, items[j]);
                fail_at(c, item, field, "%ld appears twice (first at %d:%d)", v[i],
                        line_of(first), col_of(first));
                goto fail;
            }
        }
    }
    if (pos) {
        *pos = bt_xmalloc(sizeof **pos * (size_t)cnt);
        for (int i = 0; i < cnt; i++) {
            const yaml_node_t *item = node(c, items[i]);
            (*pos)[i] = (bt_srcpos){line_of(item), col_of(item)};
        }
    }
    *vals = v;
    *count = cnt;
    return 0;
fail:
    free(v);
    return -1;
}

/* Keys must be strings and unique: libyaml keeps both of a duplicated pair, and which one
 * wins would differ between tools. */
static int check_map(const ctx *c, const yaml_node_t *m, const char *field)
{
    const yaml_node_pair_t *pairs = m->data.mapping.pairs.start;
    int n = (int)(m->data.mapping.pairs.top - pairs);
    char what[64], cl[48];
    for (int i = 0; i < n; i++) {
        const yaml_node_t *key = node(c, pairs[i].key);
        if (key->type != YAML_SCALAR_NODE)
            return fail_at(c, key, field, "keys must be names, found %s", describe(key, what));
        for (int j = 0; j < i; j++) {
            const yaml_node_t *prev = node(c, pairs[j].key);
            if (strcmp(scalar(prev), scalar(key)) == 0)
                return fail_at(c, key, clip(scalar(key), cl), "duplicate key (first at %d:%d)",
                               line_of(prev), col_of(prev));
        }
    }
    return 0;
}

static int parse_params(const ctx *c, const yaml_node_t *n, bt_space *s)
{
    const bt_family *f = s->family;
    char what[64], cl[48], names[256] = "", required[256] = "";
    if (n->type != YAML_MAPPING_NODE)
        return fail_at(c, n, "parameters", "expected a map of parameter lists, found %s",
                       describe(n, what));
    if (check_map(c, n, "parameters"))
        return -1;
    for (int i = 0; i < f->nparams; i++) {
        size_t used = strlen(names), req = strlen(required);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", f->params[i].key);
        if (!f->params[i].optional)
            snprintf(required + req, sizeof required - req, "%s%s", req ? ", " : "", f->params[i].key);
    }
    for (const yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *key = node(c, p->key);
        int i = bt_family_param_index(f, scalar(key));
        if (i < 0)
            return fail_at(c, key, clip(scalar(key), cl),
                           "not a parameter of the %s family (expected %s)", f->name, names);
        if (get_value_list(c, node(c, p->value), f->params[i].key, &f->params[i], &s->values[i],
                           &s->pos[i], &s->nvalues[i]))
            return -1;
    }
    for (int i = 0; i < f->nparams; i++) {
        if (!s->values[i] && f->params[i].optional) {
            /* left out: its default alone, placed at the parameters map for messages */
            s->values[i] = bt_xcalloc(1, sizeof *s->values[i]);
            s->pos[i] = bt_xcalloc(1, sizeof *s->pos[i]);
            s->values[i][0] = f->params[i].dflt, s->nvalues[i] = 1;
            s->pos[i][0].line = line_of(n), s->pos[i][0].col = col_of(n);
        } else if (!s->values[i]) {
            return fail_at(c, n, "parameters", "%s is missing (the %s family needs %s)", f->params[i].key,
                           f->name, required);
        }
    }
    return 0;
}

static int parse_operand(const ctx *c, const yaml_node_t *n, const char *kind, const bt_family *f,
                         bt_operand *o)
{
    char what[64], cl[48];
    if (n->type != YAML_SCALAR_NODE || is_null(n))
        return fail_at(c, n, kind, "expected a parameter, block_n, block_k or an integer, found %s",
                       describe(n, what));
    const char *s = scalar(n);
    memset(o, 0, sizeof *o);
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strchr("+-0123456789", s[0])) {
        o->kind = BT_OPD_CONST;
        return get_value(c, n, kind, NULL, &o->value);
    }
    if (strcmp(s, "block_n") == 0) {
        o->kind = BT_OPD_BLOCK_N;
    } else if (strcmp(s, "block_k") == 0) {
        o->kind = BT_OPD_BLOCK_K;
    } else {
        o->kind = BT_OPD_PARAM;
        o->param = bt_family_param_index(f, s);
        if (o->param < 0)
            return fail_at(c, n, kind,
                           "unknown operand \"%s\" (expected a parameter of the %s family, "
                           "block_n, block_k or a positive integer)",
                           clip(s, cl), f->name);
        /* a switch such as INT8_CONVERT: 0 would divide by zero in satisfies() */
        if (f->params[o->param].min < 1)
            return fail_at(c, n, kind, "%s can be 0, and constraints take positive operands",
                           f->params[o->param].key);
    }
    return 0;
}

static void constraint_text(bt_constraint *k, const char *kind, const bt_family *f)
{
    size_t n = sizeof k->text;
    char *t = k->text;
    int used = snprintf(t, n, "%s: [", kind);
    for (int i = 0; i < k->noperands && used >= 0 && (size_t)used < n; i++) {
        const bt_operand *o = &k->operands[i];
        const char *sep = i ? ", " : "";
        int w;
        if (o->kind == BT_OPD_CONST)
            w = snprintf(t + used, n - (size_t)used, "%s%ld", sep, o->value);
        else
            w = snprintf(t + used, n - (size_t)used, "%s%s", sep,
                         o->kind == BT_OPD_BLOCK_N   ? "block_n"
                         : o->kind == BT_OPD_BLOCK_K ? "block_k"
                                                     : f->params[o->param].key);
        used = w < 0 ? -1 : used + w;
    }
    if (used >= 0 && (size_t)used < n)
        snprintf(t + used, n - (size_t)used, "]");
}

static int parse_constraint(const ctx *c, const yaml_node_t *item, const bt_family *f,
                            bt_constraint *k)
{
    char what[64], cl[48];
    static const char example[] = "such as \"divides: [BLOCK_SIZE_K, block_k]\"";
    if (item->type != YAML_MAPPING_NODE)
        return fail_at(c, item, "constraints", "expected a one-key map %s, found %s", example,
                       describe(item, what));
    int nkeys = (int)(item->data.mapping.pairs.top - item->data.mapping.pairs.start);
    if (nkeys != 1)
        return fail_at(c, item, "constraints", "expected a one-key map %s, found %d keys",
                       example, nkeys);
    const yaml_node_t *key = node(c, item->data.mapping.pairs.start->key);
    const yaml_node_t *ops = node(c, item->data.mapping.pairs.start->value);
    if (key->type != YAML_SCALAR_NODE)
        return fail_at(c, key, "constraints", "expected a constraint name, found %s",
                       describe(key, what));
    int ki = 0;
    while (ki < NCON_KINDS && strcmp(con_kinds[ki].name, scalar(key)) != 0)
        ki++;
    if (ki == NCON_KINDS)
        return fail_at(c, key, "constraints",
                       "unknown constraint \"%s\" (expected divides, at_most or product_at_most)",
                       clip(scalar(key), cl));
    const char *kind = con_kinds[ki].name;
    if (ops->type != YAML_SEQUENCE_NODE)
        return fail_at(c, ops, kind, "expected a list of operands, found %s", describe(ops, what));
    int nops = (int)(ops->data.sequence.items.top - ops->data.sequence.items.start);
    if (nops < con_kinds[ki].min || nops > con_kinds[ki].max) {
        if (con_kinds[ki].min == con_kinds[ki].max)
            return fail_at(c, ops, kind, "expected %d operands, found %d", con_kinds[ki].min, nops);
        return fail_at(c, ops, kind, "expected %d to %d operands, found %d", con_kinds[ki].min,
                       con_kinds[ki].max, nops);
    }
    memset(k, 0, sizeof *k);
    k->kind = con_kinds[ki].kind;
    k->noperands = nops;
    k->line = line_of(item);
    k->col = col_of(item);
    int params = 0;
    for (int i = 0; i < nops; i++) {
        if (parse_operand(c, node(c, ops->data.sequence.items.start[i]), kind, f, &k->operands[i]))
            return -1;
        params += k->operands[i].kind == BT_OPD_PARAM;
    }
    /* Without a parameter it would keep all candidates or none. */
    if (params == 0)
        return fail_at(c, ops, kind, "names no parameter of the %s family", f->name);
    constraint_text(k, kind, f);
    return 0;
}

static int parse_constraints(const ctx *c, const yaml_node_t *n, bt_space *s)
{
    char what[64];
    if (n->type != YAML_SEQUENCE_NODE)
        return fail_at(c, n, "constraints", "expected a list of constraints, found %s",
                       describe(n, what));
    const yaml_node_item_t *items = n->data.sequence.items.start;
    int cnt = (int)(n->data.sequence.items.top - items);
    s->constraints = bt_xcalloc((size_t)cnt, sizeof *s->constraints);
    for (int i = 0; i < cnt; i++) {
        if (parse_constraint(c, node(c, items[i]), s->family, &s->constraints[i]))
            return -1;
        s->nconstraints++;
    }
    return 0;
}

/* Scalars are used as C strings from here on: an escaped "\0" would cut one short unseen. */
static int check_nul(const ctx *c)
{
    for (const yaml_node_t *n = c->doc->nodes.start; n < c->doc->nodes.top; n++)
        if (n->type == YAML_SCALAR_NODE && strlen(scalar(n)) != n->data.scalar.length)
            return fail_at(c, n, "YAML syntax", "a NUL character (\"\\0\") is not allowed");
    return 0;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Fills s piece by piece; on failure the caller frees what was filled. */
static int parse_space(const ctx *c, const yaml_node_t *root, bt_space *s)
{
    const yaml_node_t *top[K_COUNT] = {0};
    char what[64], cl[48];
    const char *str;
    if (root->type != YAML_MAPPING_NODE)
        return fail_at(c, root, "top level",
                       "expected a map with name, batch_sizes and parameters, found %s",
                       describe(root, what));
    if (check_map(c, root, "top level"))
        return -1;
    for (const yaml_node_pair_t *p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top; p++) {
        const yaml_node_t *key = node(c, p->key);
        int k = 0;
        while (k < K_COUNT && strcmp(top_keys[k], scalar(key)) != 0)
            k++;
        if (k == K_COUNT)
            return fail_at(c, key, clip(scalar(key), cl),
                           "unknown key (expected name, description, family, batch_sizes, "
                           "parameters or constraints)");
        top[k] = node(c, p->value);
    }
    /* An optional key left empty (every constraint commented out, say) takes its default. */
    static const int optional[] = {K_DESCRIPTION, K_FAMILY, K_CONSTRAINTS};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        if (top[optional[i]] && is_null(top[optional[i]]))
            top[optional[i]] = NULL;
    static const int required[] = {K_NAME, K_BATCH, K_PARAMS};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!top[required[i]])
            return fail_at(c, root, top_keys[required[i]], "missing (it is required)");

    if (!(str = get_string(c, top[K_NAME], "name")))
        return -1;
    s->name = bt_strdup(str);
    if (top[K_DESCRIPTION]) {
        if (!(str = get_string(c, top[K_DESCRIPTION], "description")))
            return -1;
        s->description = bt_strdup(str);
    }
    s->family = &bt_family_classic;
    if (top[K_FAMILY]) {
        if (!(str = get_string(c, top[K_FAMILY], "family")))
            return -1;
        if (!(s->family = bt_family_find(str)))
            return fail_at(c, top[K_FAMILY], "family", "unknown family \"%s\"", clip(str, cl));
    }
    /* the range --batch-sizes takes */
    static const bt_param_def batch_def = {.key = "batch_sizes", .min = 1, .max = BT_MAX_DIM};
    if (get_value_list(c, top[K_BATCH], "batch_sizes", &batch_def, &s->batch, NULL, &s->nbatch))
        return -1;
    qsort(s->batch, (size_t)s->nbatch, sizeof *s->batch, cmp_long);
    if (parse_params(c, top[K_PARAMS], s))
        return -1;
    if (top[K_CONSTRAINTS] && parse_constraints(c, top[K_CONSTRAINTS], s))
        return -1;
    return 0;
}

static int syntax_error(const char *path, const yaml_parser_t *p, const char *text, bt_err *err)
{
    size_t line = p->problem_mark.line + 1, col = p->problem_mark.column + 1;
    const char *problem = p->problem ? p->problem : "cannot be parsed";
    if (p->error == YAML_READER_ERROR) { /* the reader reports a byte offset, not a mark */
        line = col = 1;
        for (size_t i = 0; i < p->problem_offset && text[i]; i++, col++)
            if (text[i] == '\n')
                line++, col = 0;
    }
    if (p->context)
        return bt_fail(err, "%s:%zu:%zu: YAML syntax: %s (%s at %zu:%zu)", path, line, col,
                       problem, p->context, p->context_mark.line + 1,
                       p->context_mark.column + 1);
    return bt_fail(err, "%s:%zu:%zu: YAML syntax: %s", path, line, col, problem);
}

/* libyaml's scanner walks every open flow level on each token, so thousands of nested "[" take
 * time quadratic in the depth; a search space needs 4 levels. Read the events first and stop at
 * the first one nested too deep, before the scanner has gone far past it, or anchored. */
#define MAX_DEPTH 32
/* Keys and values in all (a search space has a few hundred at most): duplicate keys and repeated
 * values are then found by comparing each with those before it, which a file of millions of
 * values would make hours of work. */
#define MAX_SCALARS 4096

static int check_events(const char *path, const char *text, size_t len, bt_err *err)
{
    int rc = -1, depth = 0, scalars = 0;
    yaml_parser_t p;
    yaml_event_t ev;
    if (!yaml_parser_initialize(&p))
        return bt_fail(err, "%s: cannot initialize the YAML parser", path);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    for (;;) {
        if (!yaml_parser_parse(&p, &ev)) {
            syntax_error(path, &p, text, err);
            goto out;
        }
        yaml_event_type_t type = ev.type;
        yaml_mark_t at = ev.start_mark;
        int anchored = type == YAML_ALIAS_EVENT ||
                       (type == YAML_SCALAR_EVENT && ev.data.scalar.anchor) ||
                       (type == YAML_SEQUENCE_START_EVENT && ev.data.sequence_start.anchor) ||
                       (type == YAML_MAPPING_START_EVENT && ev.data.mapping_start.anchor);
        int tagged = (type == YAML_SCALAR_EVENT && ev.data.scalar.tag) ||
                     (type == YAML_SEQUENCE_START_EVENT && ev.data.sequence_start.tag) ||
                     (type == YAML_MAPPING_START_EVENT && ev.data.mapping_start.tag);
        yaml_event_delete(&ev);
        /* "!!str 16" is a string to other tools, and the document libyaml builds reads it as 16 */
        if (tagged) {
            bt_fail(err, "%s:%zu:%zu: YAML syntax: tags such as !!str are not supported", path,
                    at.line + 1, at.column + 1);
            goto out;
        }
        /* libyaml looks each alias up among all anchors (50000 of each took a minute), and an
         * aliased node keeps only its anchor's position, so messages would point there */
        if (anchored) {
            bt_fail(err, "%s:%zu:%zu: YAML syntax: anchors and aliases (&name, *name) are not "
                    "supported; write the values out", path, at.line + 1, at.column + 1);
            goto out;
        }
        if (type == YAML_STREAM_END_EVENT)
            break;
        if (type == YAML_SCALAR_EVENT && ++scalars > MAX_SCALARS) {
            bt_fail(err, "%s:%zu:%zu: more than %d keys and values; a search space needs far fewer",
                    path, at.line + 1, at.column + 1, MAX_SCALARS);
            goto out;
        }
        if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT)
            depth--;
        if ((type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) &&
            ++depth > MAX_DEPTH) {
            bt_fail(err, "%s:%zu:%zu: YAML syntax: lists and maps nested more than %d deep", path,
                    at.line + 1, at.column + 1, MAX_DEPTH);
            goto out;
        }
    }
    rc = 0;
out:
    yaml_parser_delete(&p);
    return rc;
}

int bt_space_load(const char *path, bt_space *out, bt_err *err)
{
    int rc = -1, have_doc = 0;
    char *text = NULL;
    size_t len;
    yaml_parser_t parser;
    yaml_document_t doc, next;
    bt_space s;
    memset(&s, 0, sizeof s);
    if (bt_read_file(path, &text, &len, err))
        return -1;
    if (check_events(path, text, len, err)) {
        free(text);
        return -1;
    }
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return bt_fail(err, "%s: cannot initialize the YAML parser", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        syntax_error(path, &parser, text, err);
        goto out;
    }
    have_doc = 1;
    ctx c = {path, &doc, err};
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        bt_fail(err, "%s:1:1: top level: the file is empty (expected a map with name, "
                "batch_sizes and parameters)", path);
        goto out;
    }
    /* Read to the end first, so a syntax error anywhere is reported before content errors. */
    if (!yaml_parser_load(&parser, &next)) {
        syntax_error(path, &parser, text, err);
        goto out;
    }
    const yaml_node_t *extra = yaml_document_get_root_node(&next);
    int single = extra == NULL;
    if (!single)
        bt_fail(err, "%s:%d:%d: top level: a second YAML document (a search space is one)", path,
                line_of(extra), col_of(extra));
    yaml_document_delete(&next);
    if (!single || check_nul(&c) || parse_space(&c, root, &s))
        goto out;
    s.path = bt_strdup(path);
    *out = s;
    memset(&s, 0, sizeof s);
    rc = 0;
out:
    bt_space_free(&s);
    if (have_doc)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
    return rc;
}

void bt_space_free(bt_space *s)
{
    free(s->path);
    free(s->name);
    free(s->description);
    for (int i = 0; i < BT_MAXPARAM; i++) {
        free(s->values[i]);
        free(s->pos[i]);
    }
    free(s->batch);
    free(s->constraints);
    memset(s, 0, sizeof *s);
}

size_t bt_space_size(const bt_space *s)
{
    size_t n = 1;
    for (int i = 0; i < s->family->nparams; i++) {
        if ((size_t)s->nvalues[i] > SIZE_MAX / n)
            return SIZE_MAX;
        n *= (size_t)s->nvalues[i];
    }
    return n;
}

static long operand_value(const bt_operand *o, const bt_cand *c, int block_n, int block_k)
{
    switch (o->kind) {
    case BT_OPD_PARAM: return c->v[o->param];
    case BT_OPD_BLOCK_N: return block_n;
    case BT_OPD_BLOCK_K: return block_k;
    default: return o->value;
    }
}

/* Every operand is positive: values and literals are checked at load, blocks on entry. */
static int satisfies(const bt_constraint *k, const bt_cand *c, int block_n, int block_k)
{
    long last = operand_value(&k->operands[k->noperands - 1], c, block_n, block_k);
    long first = operand_value(&k->operands[0], c, block_n, block_k);
    switch (k->kind) {
    case BT_CON_DIVIDES: return last % first == 0;
    case BT_CON_AT_MOST: return first <= last;
    case BT_CON_PRODUCT_AT_MOST: {
        long prod = 1;
        for (int i = 0; i < k->noperands - 1; i++) {
            long v = operand_value(&k->operands[i], c, block_n, block_k);
            if (prod > last / v) /* prod * v > last, without overflowing */
                return 0;
            prod *= v;
        }
        return 1;
    }
    }
    return 0;
}

static int fail_empty(const bt_space *s, size_t total, int block_n, int block_k, bt_err *err)
{
    char list[BT_ERRMAX] = "";
    size_t used = 0;
    for (int i = 0; i < s->nconstraints && used < sizeof list; i++) {
        const bt_constraint *k = &s->constraints[i];
        int w = snprintf(list + used, sizeof list - used, "%s\"%s\" (%d:%d)", i ? ", " : "",
                         k->text, k->line, k->col);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return bt_fail(err,
                   "%s: none of the %zu candidates satisfies the constraints with block_n %d, "
                   "block_k %d: %s",
                   s->path, total, block_n, block_k, list);
}

int bt_space_enumerate(const bt_space *s, int block_n, int block_k, bt_cand **out, size_t *n,
                       bt_err *err)
{
    const bt_family *f = s->family;
    if (block_n <= 0 || block_k <= 0)
        return bt_fail(err, "%s: the quantization block [%d, %d] must be positive", s->path,
                       block_n, block_k);
    int rc = -1, idx[BT_MAXPARAM] = {0};
    int bk = bt_family_param_index(f, "BLOCK_SIZE_K");
    char *bk_kept = bk >= 0 ? bt_xcalloc((size_t)s->nvalues[bk], 1) : NULL;
    size_t total = bt_space_size(s), cnt = 0, cap = 0;
    bt_cand *cands = NULL;
    for (size_t t = 0; t < total; t++) {
        bt_cand cand;
        memset(&cand, 0, sizeof cand);
        for (int p = 0; p < f->nparams; p++)
            cand.v[p] = (int)s->values[p][idx[p]];
        int ok = 1;
        for (int i = 0; i < s->nconstraints && ok; i++)
            ok = satisfies(&s->constraints[i], &cand, block_n, block_k);
        if (ok) {
            if (cnt == cap)
                cands = bt_xrealloc(cands, sizeof *cands * (cap = cap ? 2 * cap : 256));
            cands[cnt++] = cand;
            if (bk >= 0)
                bk_kept[idx[bk]] = 1;
        }
        for (int p = f->nparams - 1; p >= 0 && ++idx[p] == s->nvalues[p]; p--)
            idx[p] = 0;
    }
    /* The kernel cannot split a quantization block across K steps; say which value and how
     * to skip it rather than letting every such candidate fail later. */
    for (int i = 0; bk >= 0 && i < s->nvalues[bk]; i++) {
        long v = s->values[bk][i];
        if (bk_kept[i] && block_k % v != 0) {
            bt_fail(err,
                    "%s:%d:%d: %s: %ld does not divide the quantization block_k %d (add the "
                    "constraint \"divides: [%s, block_k]\" to skip such values)",
                    s->path, s->pos[bk][i].line, s->pos[bk][i].col, f->params[bk].key, v,
                    block_k, f->params[bk].key);
            goto out;
        }
    }
    if (cnt == 0) {
        fail_empty(s, total, block_n, block_k, err);
        goto out;
    }
    *out = cands;
    *n = cnt;
    cands = NULL;
    rc = 0;
out:
    free(cands);
    free(bk_kept);
    return rc;
}

/* The canonical text is hashed piece by piece; every list ends its line, so no two different
 * spaces produce the same text. */
static void digest_line(bt_sha256 *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void digest_line(bt_sha256 *h, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        bt_sha256_update(h, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void bt_space_digest(const bt_space *s, char out[65])
{
    const bt_family *f = s->family;
    bt_sha256 h;
    bt_sha256_init(&h);
    digest_line(&h, "blocktune search space 1\nfamily %s\n", f->name);
    for (int p = 0; p < f->nparams; p++) {
        digest_line(&h, "%s", f->params[p].key);
        for (int i = 0; i < s->nvalues[p]; i++)
            digest_line(&h, " %ld", s->values[p][i]);
        digest_line(&h, "\n");
    }
    digest_line(&h, "batch_sizes");
    for (int i = 0; i < s->nbatch; i++)
        digest_line(&h, " %ld", s->batch[i]);
    digest_line(&h, "\n");
    for (int i = 0; i < s->nconstraints; i++)
        digest_line(&h, "%s\n", s->constraints[i].text);
    bt_sha256_hex(&h, out);
}
