#include <stdlib.h>

#include "harness.h"
#include "shapes.h"

static void check_shapes(bt_t *t, const bt_shape *got, int n, const long (*want)[2], int nwant)
{
    CHECK_EQ(n, nwant);
    for (int i = 0; i < n && i < nwant; i++) {
        if (got[i].N != want[i][0] || got[i].K != want[i][1])
            bt_check_fail(t, __FILE__, __LINE__, "shape %d: (%ld, %ld), want (%ld, %ld)", i,
                          got[i].N, got[i].K, want[i][0], want[i][1]);
    }
}

TEST(shapes_deepseek_v3_tp8_as_sglang)
{
    static const long want[][2] = {
        {576, 7168},  {24576, 7168}, {32768, 512}, {7168, 16384}, {7168, 18432},
        {4608, 7168}, {3072, 7168},  {4096, 512},  {3072, 1536},  {512, 7168},
        {7168, 2304}, {7168, 2048},  {7168, 256},
    };
    bt_shape *s = NULL;
    int n = 0;
    bt_err err;
    CHECK_EQ(bt_shapes_deepseek_v3(8, &s, &n, &err), 0);
    check_shapes(t, s, n, want, 13);
    if (n == 13) {
        CHECK_STREQ(s[0].label, "kv_a_proj_with_mqa");
        CHECK_STREQ(s[2].label, "kv_b_proj");
        CHECK_STREQ(s[5].label, "dense gate_up_proj (N/tp)");
        CHECK_STREQ(s[8].label, "q_b_proj (N/tp)");
        CHECK_STREQ(s[9].label, "shared expert gate_up_proj (N/tp)");
        CHECK_STREQ(s[10].label, "dense down_proj (K/tp)");
        CHECK_STREQ(s[11].label, "o_proj (K/tp)");
        CHECK_STREQ(s[12].label, "shared expert down_proj (K/tp)");
    }
    free(s);
}

TEST(shapes_deepseek_v3_tp1_keeps_sglangs_repeats)
{
    static const long want[][2] = {
        {576, 7168},   {24576, 7168}, {32768, 512}, {7168, 16384}, {7168, 18432},
        {36864, 7168}, {24576, 7168}, {32768, 512}, {24576, 1536}, {4096, 7168},
        {7168, 18432}, {7168, 16384}, {7168, 2048},
    };
    bt_shape *s = NULL;
    int n = 0;
    bt_err err;
    CHECK_EQ(bt_shapes_deepseek_v3(1, &s, &n, &err), 0);
    check_shapes(t, s, n, want, 13);
    free(s);
}

TEST(shapes_deepseek_v3_rejects_tp_that_does_not_divide)
{
    bt_shape *s = NULL;
    int n = 0;
    bt_err err;
    CHECK_EQ(bt_shapes_deepseek_v3(3, &s, &n, &err), -1);
    CHECK_STREQ(err.msg, "--tp-size 3 does not divide N=32768 of DeepSeek-V3's kv_b_proj");
    CHECK_EQ(bt_shapes_deepseek_v3(5, &s, &n, &err), -1);
    CHECK_STREQ(err.msg, "--tp-size 5 does not divide N=36864 of DeepSeek-V3's dense gate_up_proj");
    CHECK_EQ(bt_shapes_deepseek_v3(4096, &s, &n, &err), -1);
    CHECK_STREQ(err.msg, "--tp-size 4096 does not divide K=18432 of DeepSeek-V3's dense down_proj");
    CHECK_EQ(bt_shapes_deepseek_v3(0, &s, &n, &err), -1);
    CHECK_STREQ(err.msg, "--tp-size 0: must be a positive integer");
    CHECK(s == NULL);
}

TEST(shapes_deepseek_v3_checks_every_derived_shape)
{
    bt_shape *s = NULL;
    int n = 0;
    bt_err err;
    /* 256 divides every split dimension, but 18432/256 = 72 is no multiple of 16 */
    CHECK_EQ(bt_shapes_deepseek_v3(256, &s, &n, &err), -1);
    CHECK_STREQ(err.msg, "--tp-size 256: shape (7168, 72) of DeepSeek-V3's dense down_proj (K/tp): "
                         "K = 72 is not a multiple of 16 (the kernels copy rows in 16-byte pieces)");
    CHECK(s == NULL);
    /* the largest tp whose shapes all pass */
    CHECK_EQ(bt_shapes_deepseek_v3(128, &s, &n, &err), 0);
    CHECK_EQ(n, 13);
    free(s);
}

/* Qwen3-VL-32B-Instruct's config.json, trimmed: the language model's fields sit under
 * text_config. */
static const char *qwen3_vl_32b =
    "{\n"
    "  \"architectures\": [\"Qwen3VLForConditionalGeneration\"],\n"
    "  \"model_type\": \"qwen3_vl\",\n"
    "  \"text_config\": {\n"
    "    \"head_dim\": 128,\n"
    "    \"hidden_size\": 5120,\n"
    "    \"intermediate_size\": 25600,\n"
    "    \"num_attention_heads\": 64,\n"
    "    \"num_hidden_layers\": 64,\n"
    "    \"num_key_value_heads\": 8,\n"
    "    \"rope_theta\": 5000000\n"
    "  },\n"
    "  \"vision_config\": {\"hidden_size\": 1152, \"depth\": 27}\n"
    "}\n";

TEST(shapes_from_model_qwen3_vl_32b)
{
    const char *path = bt_scratch_file("qwen3vl.json", qwen3_vl_32b);
    static const long tp1[][2] = {{10240, 5120}, {5120, 8192}, {51200, 5120}, {5120, 25600}};
    static const long tp8[][2] = {{1280, 5120}, {5120, 1024}, {6400, 5120}, {5120, 3200}};
    bt_shape *s = NULL;
    char *why = NULL;
    int n = 0;
    bt_err err = {{0}};
    CHECK_EQ(bt_shapes_from_model(path, 1, &s, &n, &why, &err), 0);
    CHECK_STREQ(err.msg, "");
    check_shapes(t, s, n, tp1, 4);
    free(s);
    free(why);
    s = NULL, why = NULL;
    CHECK_EQ(bt_shapes_from_model(path, 8, &s, &n, &why, &err), 0);
    check_shapes(t, s, n, tp8, 4);
    if (n == 4) {
        CHECK_STREQ(s[0].label, "qkv_proj (N/tp)");
        CHECK_STREQ(s[1].label, "o_proj (K/tp)");
        CHECK_STREQ(s[2].label, "gate_up_proj (N/tp)");
        CHECK_STREQ(s[3].label, "down_proj (K/tp)");
    }
    CHECK_STREQ(why, "fields from text_config\n"
                     "QKV: (64/8 q + 2*8/8 kv heads) * 128 head_dim = 1280 x hidden 5120\n"
                     "O: hidden 5120 x (64/8 q heads * 128 head_dim = 1024)\n"
                     "gate_up: 2 * intermediate 25600/8 = 6400 x hidden 5120\n"
                     "down: hidden 5120 x intermediate 25600/8 = 3200\n");
    free(s);
    free(why);
}

TEST(shapes_from_model_defaults_kv_heads_and_head_dim)
{
    /* Llama-2-7B: no num_key_value_heads (MHA), no head_dim. */
    const char *path = bt_scratch_file("llama2.json",
                                       "{\"hidden_size\": 4096, \"intermediate_size\": 11008, "
                                       "\"num_attention_heads\": 32, \"head_dim\": null}");
    static const long want[][2] = {{6144, 4096}, {4096, 2048}, {11008, 4096}, {4096, 5504}};
    bt_shape *s = NULL;
    char *why = NULL;
    int n = 0;
    bt_err err;
    CHECK_EQ(bt_shapes_from_model(path, 2, &s, &n, &why, &err), 0);
    check_shapes(t, s, n, want, 4);
    CHECK_STREQ(why, "head_dim: hidden_size 4096 / 32 heads = 128 (not in the config)\n"
                     "QKV: (32/2 q + 2*32/2 kv heads) * 128 head_dim = 6144 x hidden 4096\n"
                     "O: hidden 4096 x (32/2 q heads * 128 head_dim = 2048)\n"
                     "gate_up: 2 * intermediate 11008/2 = 11008 x hidden 4096\n"
                     "down: hidden 4096 x intermediate 11008/2 = 5504\n");
    free(s);
    free(why);
}

TEST(shapes_from_model_replicates_kv_heads_below_tp)
{
    /* Llama-3-8B at tp=16: 8 kv heads, so each rank holds one replicated head. */
    const char *path = bt_scratch_file("llama3.json",
                                       "{\"hidden_size\": 4096, \"intermediate_size\": 14336, "
                                       "\"num_attention_heads\": 32, \"num_key_value_heads\": 8}");
    static const long want[][2] = {{512, 4096}, {4096, 256}, {1792, 4096}, {4096, 896}};
    bt_shape *s = NULL;
    char *why = NULL;
    int n = 0;
    bt_err err;
    CHECK_EQ(bt_shapes_from_model(path, 16, &s, &n, &why, &err), 0);
    check_shapes(t, s, n, want, 4);
    CHECK_CONTAINS(why, "QKV: (32/16 q + 2*1 kv heads) * 128 head_dim = 512 x hidden 4096 "
                        "(8 kv heads < tp 16: replicated)\n");
    free(s);
    free(why);
}

TEST(shapes_from_model_errors_name_file_and_field)
{
    static const struct {
        const char *text;
        int tp;
        const char *expect;
    } cases[] = {
        {"{\"hidden_size\": 4096, \"num_attention_heads\": 32}", 1,
         ": intermediate_size: missing"},
        {"{\"text_config\": {\"hidden_size\": 4096, \"intermediate_size\": 11008}}", 1,
         ": text_config.num_attention_heads: missing"},
        {"{\"text_config\": {\"intermediate_size\": 11008}}", 1, ": hidden_size: missing"},
        {"{\"hidden_size\": 0, \"intermediate_size\": 1, \"num_attention_heads\": 1}", 1,
         ": hidden_size: 0 is not a positive integer"},
        {"{\"hidden_size\": \"4096\", \"intermediate_size\": 1, \"num_attention_heads\": 1}", 1,
         ": hidden_size: \"4096\" is not a positive integer"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11008.5, \"num_attention_heads\": 32}",
         1, ": intermediate_size: 11008.5 is not a positive integer"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11008, \"num_attention_heads\": 32, "
         "\"num_key_value_heads\": -8}",
         1, ": num_key_value_heads: -8 is not a positive integer"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11008, \"num_attention_heads\": 32}", 3,
         ": num_attention_heads: 32 is not divisible by --tp-size 3"},
        {"{\"hidden_size\": 6144, \"intermediate_size\": 16384, \"num_attention_heads\": 48, "
         "\"num_key_value_heads\": 12}",
         8, ": num_key_value_heads: 12 is not divisible by --tp-size 8"},
        {"{\"hidden_size\": 6144, \"intermediate_size\": 16384, \"num_attention_heads\": 48, "
         "\"num_key_value_heads\": 3}",
         8, ": num_key_value_heads: 3 does not divide --tp-size 8"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11000, \"num_attention_heads\": 32}", 16,
         ": intermediate_size: 11000 is not divisible by --tp-size 16"},
        {"{\"hidden_size\": 4000, \"intermediate_size\": 11008, \"num_attention_heads\": 48}", 1,
         ": head_dim: missing, and hidden_size 4000 is not divisible by num_attention_heads 48"},
        {"{\n  \"hidden_size\": 4096\n  \"intermediate_size\": 1\n}", 1, ":3:3: not valid JSON"},
        {"[4096]", 1, ": expected a JSON object (a Hugging Face config.json)"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11008, \"num_attention_heads\": 32, "
         "\"num_key_value_heads\": 5}",
         1, ": num_key_value_heads: 5 does not divide num_attention_heads 32"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11008, \"num_attention_heads\": 32, "
         "\"num_key_value_heads\": 64}",
         1, ": num_key_value_heads: 64 does not divide num_attention_heads 32"},
        {"{\"hidden_size\": 7168, \"intermediate_size\": 18432, \"num_attention_heads\": 128, "
         "\"n_routed_experts\": 256}",
         8, ": n_routed_experts: a mixture-of-experts or latent-attention model; --model derives the shapes of "
            "dense ones only (use --N/--K, or --tp-size for DeepSeek-V3)"},
        {"{\"hidden_size\": 4096, \"intermediate_size\": 11008, \"num_attention_heads\": 32, "
         "\"hidden_size\": 2048}",
         1, ": \"hidden_size\" appears twice in one object (Python's json, as Hugging Face reads the file, takes the "
            "last)"},
        /* what no kernel can run: named by the shape it would make */
        {"{\"hidden_size\": 4100, \"intermediate_size\": 11008, \"num_attention_heads\": 41}", 1,
         ": qkv_proj (N/tp) at --tp-size 1: K = 4100 is not a multiple of 16 (the kernels copy rows in "
         "16-byte pieces)"},
        {"{\"hidden_size\": 2147483647, \"intermediate_size\": 1, \"num_attention_heads\": 1}", 1,
         ": hidden_size: 2147483647 is over 1048576"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = bt_scratch_file("config.json", cases[i].text);
        bt_shape *s = NULL;
        char *why = NULL;
        int n = 0;
        bt_err err = {{0}};
        CHECK_EQ(bt_shapes_from_model(path, cases[i].tp, &s, &n, &why, &err), -1);
        char expect[4300];
        snprintf(expect, sizeof expect, "%s%s", path, cases[i].expect);
        CHECK_STREQ(err.msg, expect);
        CHECK(s == NULL && why == NULL);
    }
    bt_shape *s = NULL;
    char *why = NULL;
    int n = 0;
    bt_err err;
    const char *path = bt_scratch_file("ok.json", qwen3_vl_32b);
    CHECK_EQ(bt_shapes_from_model(path, 0, &s, &n, &why, &err), -1);
    CHECK_STREQ(err.msg, "--tp-size 0: must be a positive integer");
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/nope/config.json", bt_test_tmpdir());
    CHECK_EQ(bt_shapes_from_model(missing, 1, &s, &n, &why, &err), -1);
    CHECK_CONTAINS(err.msg, "nope/config.json: cannot open: No such file or directory");
}
