/* Kernel families: what a candidate's parameters are, which candidates a target can run (and
 * why not), the NVRTC source that instantiates one, and how to launch it. The tuner and the
 * library both go through this table, so a config means the same kernel everywhere. */
#ifndef BT_FAMILY_H
#define BT_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#define BT_MAXPARAM 8

typedef enum { BT_IN_FP8 = 0, BT_IN_INT8 = 1 } bt_in_type;
typedef enum { BT_OUT_F16 = 0, BT_OUT_BF16 = 1, BT_OUT_F32 = 2 } bt_out_type;

/* Everything about a GEMM that is fixed at compile time apart from the tile parameters. */
typedef struct {
    bt_in_type in;
    bt_out_type out;
    int block_n, block_k; /* quantization block of the weight scales (and block_k of A's) */
} bt_variant;

/* The GPU a candidate is compiled for and checked against. */
typedef struct {
    char arch[16];       /* NVRTC architecture, e.g. "sm_90a", "sm_89" */
    int cc;              /* compute capability * 10, e.g. 90 */
    long smem_optin;     /* opt-in shared memory per block, bytes */
    int sm_count;        /* 0 when unknown (no GPU) */
} bt_target;

typedef struct {
    const char *key; /* YAML key and JSON key, spelled as the serving stacks spell it */
    int pow2;        /* values must be powers of two */
    long min, max;
    const char *help;
    int optional; /* may be left out of search spaces and configs, meaning dflt */
    int dflt;
} bt_param_def;

/* One point of a search space: values in the family's parameter order. */
typedef struct {
    int v[BT_MAXPARAM];
} bt_cand;

typedef enum {
    BT_REJ_NONE = 0,
    BT_REJ_SMEM,   /* shared memory over the device's opt-in limit */
    BT_REJ_REGS,   /* accumulators alone would overflow the register file (certain spills) */
    BT_REJ_SHAPE,  /* tile shape the kernel cannot express (warp layout, quantization block) */
    BT_REJ_ARCH,   /* needs an instruction the target lacks */
    BT_REJ_COUNT
} bt_reject;

const char *bt_reject_name(bt_reject r);

/* Launch geometry for one GEMM of M rows on a given target. */
typedef struct {
    unsigned grid[3], block[3];
    unsigned cluster[3]; /* all 1 when the kernel uses no cluster */
    size_t smem;         /* dynamic shared memory bytes */
    int tile_m, tile_n, tile_k; /* TMA boxes (BT_ABI_TMA): A tile_m x tile_k, B tile_n x tile_k */
    int store_cols;             /* BT_ABI_TMA: C's store box is 64 rows x store_cols, 0 for none */
    int ctas_per_sm;            /* resident CTAs per SM the grid is sized for (0: not set) */
} bt_launch;

/* How a family's kernel takes its operands. */
typedef enum {
    BT_ABI_POINTERS, /* (A, B, C, As, Bs, M, N, K) */
    BT_ABI_TMA,      /* (tensor maps of A, B and C, C, As, Bs, M, N, K); the maps' boxes are
                        tile_m x tile_k, tile_n x tile_k and 64 x store_cols of bt_launch; C's
                        map is all zeros (unused) unless bt_nv_tma_store holds */
} bt_abi;

typedef struct bt_family {
    const char *name;   /* "classic" or "native" */
    bt_abi abi;
    /* The kernel waits for the grid before it (griddepcontrol.wait) before it touches memory,
     * so it may be launched with programmatic stream serialization. */
    int programmatic;
    const char *entry;  /* template header that defines the kernel */
    const char *kernel; /* kernel symbol (extern "C") */
    int nparams;
    const bt_param_def *params;
    /* Fills why (if not NULL) and returns the reason the candidate cannot run on the target. */
    bt_reject (*check)(const bt_cand *c, const bt_variant *v, const bt_target *t, char *why,
                       size_t whylen);
    size_t (*smem_bytes)(const bt_cand *c, const bt_variant *v);
    /* The "#define ..." lines that fix this candidate's compile-time parameters. */
    int (*defines)(const bt_cand *c, const bt_variant *v, char *buf, size_t n);
    void (*launch)(const bt_cand *c, const bt_variant *v, const bt_target *t, long M, long N,
                   long K, bt_launch *out);
    /* Candidate used when no config exists for a shape (documented heuristic). */
    void (*fallback)(long M, long N, long K, const bt_variant *v, const bt_target *t, bt_cand *out);
    /* A parameter whose every value gets its fastest candidate among a tune's finalists, or
     * NULL: the classic family's num_warps, which SGLang's Triton kernel ranks otherwise than the
     * CUDA port. */
    const char *finalist_key;
} bt_family;

extern const bt_family bt_family_classic;
extern const bt_family bt_family_native;

const bt_family *bt_family_find(const char *name);
int bt_family_param_index(const bt_family *f, const char *key);
/* Why v is no value of parameter d ("12 is not a power of two", written into why), or NULL: the
 * rule search spaces and config files are both read by. */
const char *bt_param_refuse(const bt_param_def *d, long v, char *why, size_t n);

/* Whether parameter i of c is an optional one at its default: configs and descriptions leave
 * it out, so they read as before the parameter existed. */
int bt_param_omitted(const bt_family *f, const bt_cand *c, int i);

/* "fp8"/"int8", "float16"/"bfloat16"/"float32", and the config file's dtype tag. */
const char *bt_in_name(bt_in_type t);
const char *bt_out_name(bt_out_type t);
const char *bt_dtype_tag(bt_in_type t); /* "fp8_w8a8" or "int8_w8a8" */
int bt_out_size(bt_out_type t);
/* The inverses of bt_in_name and bt_out_name; -1 (and *t untouched) for any other name. */
int bt_in_parse(const char *name, bt_in_type *t);
int bt_out_parse(const char *name, bt_out_type *t);

/* A readable one-line form, e.g. "BM=64 BN=128 BK=128 GM=32 w=4 s=3". */
void bt_cand_format(const bt_family *f, const bt_cand *c, char *buf, size_t n);
/* Every value in parameter order, e.g. "64,32,4,8,1,1,0,2": the tables' and sidecars' form. */
void bt_cand_csv(const bt_family *f, const bt_cand *c, char *buf, size_t n);

/* Target from an --arch string ("sm_90a", "sm_89", ...) with the opt-in limits of that
 * architecture; -1 for an architecture blocktune does not know. */
int bt_target_from_arch(const char *arch, bt_target *t);

#endif
