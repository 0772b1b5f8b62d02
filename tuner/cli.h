/* Command-line flags -> bt_options. Parsing only: no files are read and nothing is checked
 * against a device here. */
#ifndef BT_CLI_H
#define BT_CLI_H

#include <stdio.h>

#include "configio.h"
#include "family.h"
#include "util.h"

#define BT_VERSION "0.1.0"

/* Strings are owned by the options and released by bt_options_free. */
typedef struct {
    char *space_path;       /* --space; NULL: search_spaces/<family default>.yaml */
    char *family;           /* --family classic|native (default classic) */
    long N, K;              /* --N/--K, both or neither (0 when absent) */
    int tp;                 /* --tp-size; 8 when no shape is given, 1 with --model alone;
                             * 0 with --N/--K */
    char *model;            /* --model config.json */
    bt_in_type in;          /* --input-type fp8|int8 (default fp8) */
    bt_out_type out;        /* --out-dtype float16|bfloat16|float32 (default float16) */
    int block_n, block_k;   /* --block-n/--block-k (default 128, 128) */
    long *batch;            /* --batch-sizes 1,2,4, ascending, unique (NULL: the space's list) */
    int nbatch;
    char *arch;             /* --arch sm_90a (NULL: from the device) */
    int dry_run;            /* --dry-run */
    char *out_dir;          /* --out-dir (default configs) */
    bt_format format;       /* --format sglang|vllm */
    int jobs;               /* -j N (default: online CPUs) */
    char *cache_dir;        /* --cache-dir (default $XDG_CACHE_HOME/blocktune, else
                             * $HOME/.cache/blocktune, else ./.blocktune-cache) */
    int resume;             /* --resume */
    int device;             /* --device N (default 0); with --devices, the first of them */
    int *devices;           /* --devices 0,1,...: tune shapes on these GPUs at once, in the
                             * order given, unique (NULL: --device alone) */
    int ndevices;
    double timeout_s;       /* --timeout SECONDS a GPU step may take before the kernel counts as
                             * hung and its worker is killed (default 60) */
    int quiet;              /* --quiet: no progress line */
    int top;                /* --top N: list the N fastest candidates per batch size */
    int pdl;                /* --pdl: time native kernels launched with programmatic dependent
                             * launch, as blocktune_options.pdl runs them */
    long rest_ms;           /* --rest MS the GPU idles before each finalist's re-timing
                             * (default 100) */
    /* hidden, for tests and the worker process */
    int worker;             /* --worker: run as the GPU worker on stdin/stdout */
    char *inject;           /* --inject fault:I,hang:J plants a faulting/hanging candidate I/J */
    long inject_fault;      /* I from --inject, -1 when absent */
    long inject_hang;       /* J from --inject, -1 when absent */
} bt_options;

/* Returns 0 to run (release o with bt_options_free), 1 when --help or --version was printed
 * to out, -1 on a usage error (err holds one line naming the flag). On 1 and -1, o holds
 * nothing to release. */
int bt_cli_parse(int argc, char **argv, bt_options *o, FILE *out, bt_err *err);
void bt_cli_usage(FILE *f);
void bt_options_free(bt_options *o);

#endif
