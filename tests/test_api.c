/*
 * test_api.c - the public API (vidfeat.h) on the committed tiny model: results equal the
 * PyTorch golden on every backend, and every misuse or missing piece gives the documented status
 * with a message that says what to do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "op_cases.h"
#include "vidfeat.h"

static vf_status try_create(vf_config cfg, char *msg, size_t size)
{
    vf_extractor *ex = NULL;
    vf_status rc = vf_extractor_create(&cfg, &ex);
    snprintf(msg, size, "%s", ex ? vf_extractor_errmsg(ex) : "");
    vf_extractor_free(&ex);
    CHECK(ex == NULL);
    return rc;
}

static vf_config tiny_config(void)
{
    vf_config cfg = vf_config_default();
    cfg.model = VF_MODELS_DIR "/tiny_cnn.onnx";
    cfg.batch_size = 2;
    return cfg;
}

static void golden(const char *backend, vf_precision prec)
{
    op_golden gold;
    op_golden_load("../tiny_cnn", &gold);
    vf_config cfg = tiny_config();
    cfg.backend = backend;
    cfg.precision = prec;
    vf_extractor *ex = NULL;
    vf_status rc = vf_extractor_create(&cfg, &ex);
    CHECK_OK(rc, vf_extractor_errmsg(ex));
    vf_model_info info;
    CHECK_OK(vf_extractor_info(ex, &info), vf_extractor_errmsg(ex));
    CHECK_EQ(info.input_size, 32);
    CHECK_EQ(info.feature_dim, 10);
    CHECK_EQ(info.batch_size, 2);
    CHECK(!strcmp(info.layer, "output"));
    CHECK(!strcmp(info.name, "tiny_cnn"));
    float out[3 * 10];
    CHECK_EQ(gold.batch, 3); /* 3 images through batches of 2: one full, one short */
    CHECK_OK(vf_extractor_infer(ex, gold.x, 3, out), vf_extractor_errmsg(ex));
    if (prec == VF_PRECISION_F32)
        CHECK_MSG(vf_rel_err(out, gold.y, 30) <= 1e-5, "%s: %g", backend,
                  vf_rel_err(out, gold.y, 30));
    else
        for (int i = 0; i < 3; i++)
            CHECK(vf_cosine(out + 10 * i, gold.y + 10 * i, 10) >= 0.999);
    printf("tiny_cnn on %s (%s): %s\n", info.backend, vf_precision_str(prec), "matches PyTorch");
    vf_extractor_free(&ex);
    op_golden_free(&gold);
}

int main(void)
{
    char msg[1024];
    golden("cpu", VF_PRECISION_F32);
    int bf16 = vf_has_feature("bf16");
    if (bf16) {
        golden("cpu", VF_PRECISION_BF16);
    } else { /* refused at once, in the user's words */
        vf_config c16 = tiny_config();
        c16.backend = "cpu";
        c16.precision = VF_PRECISION_BF16;
        CHECK_EQ(try_create(c16, msg, sizeof(msg)), VF_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(msg, "AVX512-BF16 or AMX") && strstr(msg, "--precision f32") &&
                      !strstr(msg, "oneDNN"),
                  "bf16 refused with: %s", msg);
    }
    golden("ref", VF_PRECISION_F32);
    golden("auto", VF_PRECISION_F32);

    vf_config cfg = tiny_config();
    cfg.layer = "no_such_tensor";
    CHECK_EQ(try_create(cfg, msg, sizeof(msg)), VF_ERR_INVALID);
    CHECK(strstr(msg, "no_such_tensor"));

    cfg = tiny_config();
    cfg.layer = "/c1/Conv_output_0"; /* any tensor: a 4-D map, pooled */
    vf_extractor *ex = NULL;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    vf_model_info info;
    CHECK_OK(vf_extractor_info(ex, &info), "");
    CHECK_EQ(info.feature_dim, 8);
    CHECK_EQ(info.pooled, 1);
    vf_extractor_free(&ex);

    cfg = tiny_config();
    cfg.batch_size = 0;
    CHECK_EQ(try_create(cfg, msg, sizeof(msg)), VF_ERR_INVALID);
    CHECK(strstr(msg, "batch"));

    cfg = tiny_config();
    cfg.model = "no_such_model_name";
    CHECK_EQ(try_create(cfg, msg, sizeof(msg)), VF_ERR_IO);
    CHECK(strstr(msg, "vidfeat models"));

    cfg = tiny_config();
    cfg.model = "/nonexistent/dir/model.onnx";
    CHECK_EQ(try_create(cfg, msg, sizeof(msg)), VF_ERR_IO);
    CHECK(strstr(msg, "/nonexistent/dir/model.onnx"));

    cfg = tiny_config();
    cfg.backend = "nope";
    CHECK_EQ(try_create(cfg, msg, sizeof(msg)), VF_ERR_INVALID);
    CHECK(strstr(msg, "nope"));

    cfg = tiny_config();
    cfg.backend = "gpu";
    vf_status rc = try_create(cfg, msg, sizeof(msg));
    if (vf_has_feature("cuda"))
        CHECK(rc == VF_OK || rc == VF_ERR_NO_DEVICE);
    else
        CHECK(rc == VF_ERR_NOT_BUILT && strstr(msg, "VIDFEAT_CUDA"));

    cfg = tiny_config();
    cfg.backend = "ref";
    cfg.precision = VF_PRECISION_BF16;
    CHECK_EQ(try_create(cfg, msg, sizeof(msg)), VF_ERR_UNSUPPORTED);

    /* The model's input is fixed at 32; nothing after its global pool depends on the size, so it
     * runs at 64 with its shapes inferred again. */
    cfg = tiny_config();
    cfg.input_size = 64;
    CHECK_OK(vf_extractor_create(&cfg, &ex), vf_extractor_errmsg(ex));
    CHECK_OK(vf_extractor_info(ex, &info), "info");
    CHECK_EQ(info.input_size, 64);
    CHECK_EQ(info.feature_dim, 10);
    vf_extractor_free(&ex);

    /* A known model whose file is absent says where it looked and how to get it: a manifest of
     * a name no file anywhere can have (a vgg19.onnx in ./models of a developer's checkout would
     * make vgg19 itself load), so the status and the message are always checked. */
    char dir[] = "/tmp/vidfeat_api_XXXXXX", manifest[1100];
    CHECK(mkdtemp(dir));
    snprintf(manifest, sizeof(manifest), "%s/vf_absent_model.json", dir);
    FILE *mf = fopen(manifest, "w");
    CHECK(mf);
    fputs(
        "{\"vidfeat_manifest\": 1, \"name\": \"vf_absent_model\", \"file\": "
        "\"vf_absent_model.onnx\", \"export\": \"scripts/export-torchvision.py vf_absent_model\", "
        "\"input\": {\"size\": 224, \"channel_order\": \"RGB\", \"resize\": \"stretch\", "
        "\"mean\": [0, 0, 0], \"std\": [1, 1, 1]}, \"layers\": [{\"name\": \"out\", "
        "\"tensor\": \"output\", \"dim\": 10}]}\n",
        mf);
    CHECK(fclose(mf) == 0);
    cfg = tiny_config();
    cfg.model = "vf_absent_model";
    cfg.models_dir = dir;
    rc = try_create(cfg, msg, sizeof(msg));
    CHECK_MSG(rc == VF_ERR_IO, "absent model file: %s: %s", vf_status_str(rc), msg);
    /* no download address in the manifest: the export command, not fetch-models.sh */
    CHECK_MSG(strstr(msg, "vf_absent_model.onnx not found") &&
                  strstr(msg, "make it with: scripts/export-torchvision.py vf_absent_model") &&
                  !strstr(msg, "fetch-models.sh"),
              "%s", msg);
    CHECK(remove(manifest) == 0 && rmdir(dir) == 0);

    /* NULL handling */
    CHECK_EQ(vf_extractor_create(NULL, &ex), VF_ERR_INVALID);
    CHECK_EQ(vf_extractor_info(NULL, &info), VF_ERR_INVALID);
    vf_extractor_free(NULL);
    vf_extractor_free(&ex);

    /* Statuses and versions */
    for (int s = VF_ERR_INTERNAL; s <= VF_EOF; s++)
        CHECK(strcmp(vf_status_str((vf_status)s), "unknown status") != 0);
    CHECK(!strcmp(vf_status_str((vf_status)-99), "unknown status"));
    char build[1024];
    CHECK(strstr(vf_build_info(build, sizeof(build)), "oneDNN"));
    CHECK(vf_has_feature("dnnl") && vf_has_feature("ref") && !vf_has_feature("nope"));
    vf_precision p;
    CHECK(vf_precision_parse("BF16", &p) == VF_OK && p == VF_PRECISION_BF16);
    CHECK(vf_precision_parse("int4", &p) == VF_ERR_INVALID);

    /* The model list finds the committed manifests. */
    vf_model_list *list = NULL;
    CHECK_OK(vf_model_list_create(VF_MODELS_DIR, &list), "");
    int seen = 0;
    for (size_t i = 0; i < vf_model_list_count(list); i++) {
        const vf_model_entry *e = vf_model_list_get(list, i);
        seen += !strcmp(e->name, "vgg19") || !strcmp(e->name, "inception_v3") ||
                !strcmp(e->name, "resnet50") || !strcmp(e->name, "mobilenet_v2_1.0_224");
    }
    CHECK_EQ(seen, 4);
    vf_model_list_free(&list);
    CHECK(list == NULL);
    printf("api checks passed\n");
    if (!bf16)
        SKIP("bf16 on the CPU: this CPU, under its ISA cap, has no AVX512-BF16 or AMX (the rest "
             "passed; the refusal was checked)");
    return 0;
}
