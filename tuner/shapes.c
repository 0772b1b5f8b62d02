#include "shapes.h"

#include "configio.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DeepSeek-V3: hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope/rope/v head
 * dims 128/64/128, dense intermediate 18432, one shared expert of 2048. Listed as SGLang's
 * get_weight_shapes lists them, including q_proj as a model without q LoRA would have it. */
static const struct {
    long N, K;
    char split; /* 'N' or 'K': the dimension tp divides; 0: replicated on every rank */
    const char *name;
} deepseek_v3[] = {
    {512 + 64, 7168, 0, "kv_a_proj_with_mqa"},
    {(128 + 64) * 128, 7168, 0, "q_proj without q LoRA"},
    {128 * (128 + 128), 512, 0, "kv_b_proj"},
    {7168, 128 * 128, 0, "o_proj"},
    {7168, 18432, 0, "dense down_proj"},
    {18432 * 2, 7168, 'N', "dense gate_up_proj"},
    {(128 + 64) * 128, 7168, 'N', "q_proj without q LoRA"},
    {128 * (128 + 128), 512, 'N', "kv_b_proj"},
    {(128 + 64) * 128, 1536, 'N', "q_b_proj"},
    {2048 * 2, 7168, 'N', "shared expert gate_up_proj"},
    {7168, 18432, 'K', "dense down_proj"},
    {7168, 128 * 128, 'K', "o_proj"},
    {7168, 2048, 'K', "shared expert down_proj"},
};

int bt_shapes_deepseek_v3(int tp, bt_shape **out, int *n, bt_err *err)
{
    const int count = (int)(sizeof deepseek_v3 / sizeof deepseek_v3[0]);
    if (tp < 1)
        return bt_fail(err, "--tp-size %d: must be a positive integer", tp);
    for (int i = 0; i < count; i++) {
        char s = deepseek_v3[i].split;
        long dim = s == 'N' ? deepseek_v3[i].N : deepseek_v3[i].K;
        if (s && dim % tp != 0)
            return bt_fail(err, "--tp-size %d does not divide %c=%ld of DeepSeek-V3's %s", tp, s,
                           dim, deepseek_v3[i].name);
    }
    bt_shape *v = bt_xcalloc((size_t)count, sizeof *v);
    for (int i = 0; i < count; i++) {
        char s = deepseek_v3[i].split;
        v[i].N = deepseek_v3[i].N / (s == 'N' ? tp : 1);
        v[i].K = deepseek_v3[i].K / (s == 'K' ? tp : 1);
        snprintf(v[i].label, sizeof v[i].label, "%s%s", deepseek_v3[i].name,
                 s == 'N' ? " (N/tp)" : s == 'K' ? " (K/tp)" : "");
        /* a large tp divides K evenly yet leaves less than the kernels can copy */
        if (bt_shape_check(&v[i], err)) {
            bt_wrap(err, "--tp-size %d: shape (%ld, %ld) of DeepSeek-V3's %s", tp, v[i].N,
                    v[i].K, v[i].label);
            free(v);
            return -1;
        }
    }
    *out = v;
    *n = count;
    return 0;
}

int bt_shape_check(const bt_shape *s, bt_err *err)
{
    if (s->N < 1 || s->N > BT_MAX_DIM)
        return bt_fail(err, "N = %ld is outside [1, %ld]", s->N, BT_MAX_DIM);
    if (s->K < 1 || s->K > BT_MAX_DIM)
        return bt_fail(err, "K = %ld is outside [1, %ld]", s->K, BT_MAX_DIM);
    if (s->K % 16 != 0)
        return bt_fail(err, "K = %ld is not a multiple of 16 (the kernels copy rows in 16-byte pieces)", s->K);
    return 0;
}

/* A positive integer field of obj; *out = 0 when it is optional and absent (or null, as some
 * configs write an unset head_dim). */
static int get_field(const char *path, const cJSON *obj, const char *prefix, const char *name,
                     int required, long *out, bt_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v)) {
        *out = 0;
        return required ? bt_fail(err, "%s: %s%s: missing", path, prefix, name) : 0;
    }
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || !(d >= 1 && d <= INT_MAX) || d != (double)(long)d) {
        char *txt = cJSON_PrintUnformatted(v);
        bt_fail(err, "%s: %s%s: %.40s is not a positive integer", path, prefix, name,
                txt ? txt : "value");
        cJSON_free(txt);
        return -1;
    }
    /* products of two fields then stay far inside a long */
    if (d > BT_MAX_DIM)
        return bt_fail(err, "%s: %s%s: %.0f is over %ld", path, prefix, name, d, BT_MAX_DIM);
    *out = (long)d;
    return 0;
}

int bt_shapes_from_model(const char *path, int tp, bt_shape **out, int *n, char **derivation,
                         bt_err *err)
{
    int rc = -1;
    cJSON *root = NULL;
    if (tp < 1)
        return bt_fail(err, "--tp-size %d: must be a positive integer", tp);
    if (!(root = bt_json_read(path, err)))
        return -1;
    if (!cJSON_IsObject(root)) {
        bt_fail(err, "%s: expected a JSON object (a Hugging Face config.json)", path);
        goto out;
    }
    const char *dup = bt_json_duplicate_key(root);
    if (dup) {
        bt_fail(err, "%s: \"%.80s\" appears twice in one object (Python's json, as Hugging Face reads the file, "
                "takes the last)", path, dup);
        goto out;
    }
    /* Vision-language models (Qwen3-VL) keep the language model's fields in text_config. */
    const cJSON *obj = root;
    const char *pre = "";
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_GetObjectItemCaseSensitive(root, "hidden_size") && cJSON_IsObject(tc) &&
        cJSON_GetObjectItemCaseSensitive(tc, "hidden_size"))
        obj = tc, pre = "text_config.";

    /* Mixture-of-experts and latent-attention models have other weight shapes than the four
     * derived here (experts, MLA's low-rank projections): refused, not tuned wrongly. */
    static const char *const not_dense[] = {"n_routed_experts", "num_local_experts", "num_experts",
                                            "moe_intermediate_size", "kv_lora_rank", "q_lora_rank"};
    for (size_t i = 0; i < sizeof not_dense / sizeof not_dense[0]; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, not_dense[i]);
        if (f && !cJSON_IsNull(f) && !(cJSON_IsNumber(f) && f->valuedouble == 0)) {
            bt_fail(err, "%s: %s%s: a mixture-of-experts or latent-attention model; --model derives the "
                    "shapes of dense ones only (use --N/--K, or --tp-size for DeepSeek-V3)", path, pre, not_dense[i]);
            goto out;
        }
    }
    long hidden, inter, heads, kv, hd;
    if (get_field(path, obj, pre, "hidden_size", 1, &hidden, err) ||
        get_field(path, obj, pre, "intermediate_size", 1, &inter, err) ||
        get_field(path, obj, pre, "num_attention_heads", 1, &heads, err) ||
        get_field(path, obj, pre, "num_key_value_heads", 0, &kv, err) ||
        get_field(path, obj, pre, "head_dim", 0, &hd, err))
        goto out;
    char notes[256] = "";
    if (!kv)
        kv = heads;
    if (kv > heads || heads % kv != 0) { /* each kv head serves a whole group of q heads */
        bt_fail(err, "%s: %snum_key_value_heads: %ld does not divide num_attention_heads %ld", path, pre, kv, heads);
        goto out;
    }
    if (!hd) {
        if (hidden % heads != 0) {
            bt_fail(err, "%s: %shead_dim: missing, and hidden_size %ld is not divisible by "
                    "num_attention_heads %ld", path, pre, hidden, heads);
            goto out;
        }
        hd = hidden / heads;
        snprintf(notes, sizeof notes, "head_dim: hidden_size %ld / %ld heads = %ld (not in %s)\n",
                 hidden, heads, hd, *pre ? "text_config" : "the config");
    }
    if (heads % tp != 0) {
        bt_fail(err, "%s: %snum_attention_heads: %ld is not divisible by --tp-size %d", path,
                pre, heads, tp);
        goto out;
    }
    /* Fewer kv heads than ranks: each rank holds one, replicated tp/kv times. */
    if (kv >= tp ? kv % tp != 0 : tp % kv != 0) {
        bt_fail(err, "%s: %snum_key_value_heads: %ld %s --tp-size %d", path, pre, kv,
                kv >= tp ? "is not divisible by" : "does not divide", tp);
        goto out;
    }
    if (inter % tp != 0) {
        bt_fail(err, "%s: %sintermediate_size: %ld is not divisible by --tp-size %d", path, pre,
                inter, tp);
        goto out;
    }
    long q_rank = heads / tp, kv_rank = kv >= tp ? kv / tp : 1;
    char kv_expr[48], replicated[96] = "";
    if (kv >= tp) {
        snprintf(kv_expr, sizeof kv_expr, "%ld/%d", kv, tp);
    } else {
        snprintf(kv_expr, sizeof kv_expr, "1");
        snprintf(replicated, sizeof replicated, " (%ld kv heads < tp %d: replicated)", kv, tp);
    }
    bt_shape *v = bt_xcalloc(4, sizeof *v);
    v[0] = (bt_shape){(q_rank + 2 * kv_rank) * hd, hidden, "qkv_proj (N/tp)"};
    v[1] = (bt_shape){hidden, q_rank * hd, "o_proj (K/tp)"};
    v[2] = (bt_shape){2 * inter / tp, hidden, "gate_up_proj (N/tp)"};
    v[3] = (bt_shape){hidden, inter / tp, "down_proj (K/tp)"};
    for (int i = 0; i < 4; i++)
        if (bt_shape_check(&v[i], err)) {
            bt_wrap(err, "%s: %s at --tp-size %d", path, v[i].label, tp);
            free(v);
            goto out;
        }
    char buf[2048];
    snprintf(buf, sizeof buf,
             "%s%s"
             "QKV: (%ld/%d q + 2*%s kv heads) * %ld head_dim = %ld x hidden %ld%s\n"
             "O: hidden %ld x (%ld/%d q heads * %ld head_dim = %ld)\n"
             "gate_up: 2 * intermediate %ld/%d = %ld x hidden %ld\n"
             "down: hidden %ld x intermediate %ld/%d = %ld\n",
             *pre ? "fields from text_config\n" : "", notes, heads, tp, kv_expr, hd, v[0].N,
             hidden, replicated, hidden, heads, tp, hd, v[1].K, inter, tp, v[2].N, hidden,
             hidden, inter, tp, v[3].K);
    *derivation = bt_strdup(buf);
    *out = v;
    *n = 4;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}
