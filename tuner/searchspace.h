/* Search spaces: a YAML file (parsed with libyaml, whose types stay inside searchspace.c)
 * becomes plain structs; enumeration applies the file's constraints. */
#ifndef BT_SEARCHSPACE_H
#define BT_SEARCHSPACE_H

#include "family.h"
#include "util.h"

/* Operand of a constraint: a parameter of the family, a quantization block size, or a literal. */
typedef enum { BT_OPD_PARAM, BT_OPD_BLOCK_N, BT_OPD_BLOCK_K, BT_OPD_CONST } bt_operand_kind;

typedef struct {
    bt_operand_kind kind;
    int param;  /* index into the family's parameters, for BT_OPD_PARAM */
    long value; /* for BT_OPD_CONST */
} bt_operand;

typedef enum {
    BT_CON_DIVIDES,         /* a divides b */
    BT_CON_AT_MOST,         /* a <= b */
    BT_CON_PRODUCT_AT_MOST, /* product of operands[0..n-2] <= operands[n-1] */
} bt_constraint_kind;

#define BT_MAXOPERANDS 6

typedef struct {
    bt_constraint_kind kind;
    int noperands;
    bt_operand operands[BT_MAXOPERANDS];
    int line, col; /* where it was written, for messages */
    char text[128]; /* as written, e.g. "divides: [BLOCK_SIZE_K, block_k]" */
} bt_constraint;

/* Where something was written, 1-based, so checks after loading can point at it. */
typedef struct {
    int line, col;
} bt_srcpos;

typedef struct {
    char *path;
    char *name;
    char *description;
    const bt_family *family;
    int nvalues[BT_MAXPARAM];
    long *values[BT_MAXPARAM]; /* per family parameter, in file order */
    bt_srcpos *pos[BT_MAXPARAM]; /* where each of those values was written */
    int nbatch;
    long *batch; /* ascending */
    int nconstraints;
    bt_constraint *constraints;
} bt_space;

/* Loads and validates; on error nothing is allocated and err names file:line:col and field. */
int bt_space_load(const char *path, bt_space *out, bt_err *err);
void bt_space_free(bt_space *s);

/* Cartesian product of the values in the family's parameter order (the last parameter varies
 * fastest), constraints applied. Fails naming file:line:col of a BLOCK_SIZE_K value that
 * survives the constraints but does not divide block_k, or naming the file and its constraints
 * when they leave nothing. Caller frees *out. */
int bt_space_enumerate(const bt_space *s, int block_n, int block_k, bt_cand **out, size_t *n,
                       bt_err *err);

/* Size of the product before constraints. */
size_t bt_space_size(const bt_space *s);

/* Stable identity of a space's contents (for journals and provenance): sha256 of the family,
 * values, batch sizes and constraints, so comments, layout, name and description don't count. */
void bt_space_digest(const bt_space *s, char out[65]);

#endif
