/* Config files: SGLang/vLLM names and schema (batch size -> six-key object, Python's
 * json.dumps(indent=4) layout), atomic merge-on-write, provenance sidecars, and lookup. */
#ifndef BT_CONFIGIO_H
#define BT_CONFIGIO_H

#include "family.h"
#include "util.h"

typedef enum { BT_FMT_SGLANG = 0, BT_FMT_VLLM = 1 } bt_format;

typedef struct {
    long batch;
    bt_cand cand;
} bt_config_entry;

typedef struct {
    int n;
    bt_config_entry *e; /* ascending by batch */
} bt_config;

/* "N=7168,K=2304,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json"
 * (vLLM fp8: "[128,128]"; vLLM's int8 loader wants the space too). device_name is the driver's
 * name; spaces become '_'. Families other than classic append ",kernel=<name>" before ".json"
 * so serving stacks never pick them up. -1 when buf is too small. */
int bt_config_filename(char *buf, size_t n, const bt_family *f, long N, long K,
                       const char *device_name, bt_in_type in, int block_n, int block_k,
                       bt_format fmt);

/* Parses a config file; every key must be a batch size and every value must have exactly the
 * family's keys as integers. Errors name the file and the key at fault. */
int bt_config_read(const char *path, const bt_family *f, bt_config *out, bt_err *err);
/* Serializes byte-for-byte as SGLang's tuner writes (json.dumps(obj, indent=4) + "\n"). */
char *bt_config_serialize(const bt_config *c, const bt_family *f);
/* Merges entries into the file at path (new batch sizes added, existing ones replaced, none
 * dropped) and writes it atomically. An existing file that cannot be read is an error and is
 * left as it is. Merges into one directory are serialized (flock on the directory), so tuners
 * running side by side on different batch sizes lose no entries. With before, it also gets the
 * entries the file held (none for a new file), read under that lock; the caller frees them. */
int bt_config_merge_write(const char *path, const bt_family *f, const bt_config *update,
                          bt_config *before, bt_err *err);
void bt_config_set(bt_config *c, long batch, const bt_cand *cand);
void bt_config_free(bt_config *c);

/* Entry whose batch size is nearest M (ties to the smaller), as SGLang picks; NULL if empty. */
const bt_config_entry *bt_config_nearest(const bt_config *c, long M);

/* SGLang's tuning batch sizes (search_spaces/default.yaml): the Ms a serving stack is likely to
 * call with. */
#define BT_SGLANG_BATCHES 18
extern const long bt_sglang_batches[BT_SGLANG_BATCHES];

/* A batch size whose calls run another batch size's entry after a merge. */
typedef struct {
    long M, was, now;
} bt_config_move;

/* Which of SGLang's batch sizes, not in update themselves, run another batch size's entry, with
 * another config, once update is merged into before: a new key takes over the Ms nearer to it
 * than to any other (entries 1024 and 4096, and 2048 merged in: M = 3072 moves from 4096's entry
 * to 2048's). Fills out (room for BT_SGLANG_BATCHES) and returns how many. */
int bt_config_moves(const bt_config *before, const bt_config *update, bt_config_move *out);

/* Where the provenance of a config lives (never inside the config: extra keys break both
 * loaders): the config path with ".json" replaced by ".provenance.json" (appended when the path
 * does not end in ".json"). -1 when buf is too small. */
int bt_sidecar_path(char *buf, size_t n, const char *config_path);

/* Appends one run's provenance (a JSON object; ownership passes, also on failure) to the
 * config's sidecar, under the directory lock of bt_config_merge_write, so that tuners writing
 * side by side lose no runs. An existing sidecar that is not {"runs": [...]} is left as is and
 * the call fails. */
struct cJSON;
int bt_sidecar_append(const char *config_path, struct cJSON *run, bt_err *err);

/* Whether a run can merge into the config at config_path and its sidecar where they exist:
 * fails, naming the file and what is wrong with it, where bt_config_merge_write or
 * bt_sidecar_append would, so that a tune finds out before it measures. */
int bt_outputs_check(const char *config_path, const bt_family *f, bt_err *err);

/* Reads and parses a JSON file (the caller owns the result: cJSON_Delete). A syntax error is
 * one line naming path:line:col. Shared with shapes.c; the type stays opaque here. */
struct cJSON *bt_json_read(const char *path, bt_err *err);

/* A key given twice in one object anywhere in v (Python's json takes the last, cJSON the
 * first), or NULL. */
const char *bt_json_duplicate_key(const struct cJSON *v);

#endif
