/* GEMM weight shapes (N, K) to tune: given directly, DeepSeek-V3's at a tensor-parallel size
 * (as SGLang's tuner derives them, in its order), or derived from a Hugging Face config.json. */
#ifndef BT_SHAPES_H
#define BT_SHAPES_H

#include "util.h"

typedef struct {
    long N, K;
    char label[64]; /* what the weight is, e.g. "q_b_proj (N split by tp)" or "down_proj" */
} bt_shape;

/* N, K (and batch sizes) at most 2^20: the kernels' tile numbers stay 32-bit. */
#define BT_MAX_DIM 1048576L

/* What every kernel needs of a weight shape: N and K in [1, BT_MAX_DIM] and K a multiple of 16
 * (rows are copied in 16-byte pieces). The message names the dimension. */
int bt_shape_check(const bt_shape *s, bt_err *err);

/* DeepSeek-V3's 13 weight shapes at tp (*out: caller frees); fails when tp does not divide a
 * split dimension or leaves a shape bt_shape_check refuses. Like SGLang's list, it repeats
 * four shapes at tp = 1 (tune tunes each once). */
int bt_shapes_deepseek_v3(int tp, bt_shape **out, int *n, bt_err *err);

/* QKV, O, gate_up and down projections of a dense Llama/Qwen-style model at tp, from
 * hidden_size, intermediate_size, num_attention_heads, num_key_value_heads (default: the
 * attention heads) and head_dim (default: hidden_size / num_attention_heads), read from
 * "text_config" when the top level has no hidden_size (vision-language models). Fewer kv heads
 * than tp are replicated: one per rank. *out and *derivation (one line per shape) are the
 * caller's to free. Errors name the file and the field. */
int bt_shapes_from_model(const char *path, int tp, bt_shape **out, int *n, char **derivation,
                         bt_err *err);

#endif
