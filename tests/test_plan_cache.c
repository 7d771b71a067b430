/*
 * test_plan_cache.c - the measured choices kept between runs (engine/plan_cache.h): what is put
 * is read back by the next run; a damaged file (bytes, another program's JSON, entries of the
 * wrong kind, a file over the bound) is set aside with one warning and written anew whole; two
 * processes writing it at once while a third reads never leave a file that does not parse; and
 * the CPU backend, capped to AVX2, records its convolutions' choices there and follows an entry
 * it finds (a plan built after an entry saying "direct" runs vidfeat's direct kernel).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/isa.h"
#include "core/json.h"
#include "core/mem.h"
#include "engine/plan_cache.h"
#include "op_cases.h"

static int warnings;

static void count_warnings(void *user, int level, const char *tag, const char *msg)
{
    (void)user, (void)msg;
    if (level == VF_LOG_WARNING && !strcmp(tag, "plans"))
        warnings++;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static int count(void *user, const char *key, const vf_json *v)
{
    (void)key, (void)v;
    (*(int *)user)++;
    return 0;
}

/* The file parses as a plan cache with at least `least` entries. */
static void check_whole(const char *path, int least)
{
    vf_json *j = NULL;
    vf_err err = {0};
    CHECK_OK(vfi_json_load(path, 64 << 20, &j, &err), err.msg);
    CHECK(vfi_json_num(j, "vidfeat_plan_cache", 0) == 1);
    const vf_json *e = vfi_json_get(j, "entries");
    CHECK(vfi_json_is_object(e));
    int n = 0;
    vfi_json_each(e, count, &n);
    CHECK_MSG(n >= least, "%d entries, %d wanted", n, least);
    vfi_json_free(&j);
}

static void round_trip(const char *path)
{
    vf_err err = {0};
    vfi_plan_cache *pc = vfi_plan_cache_open();
    CHECK(pc && !vfi_plan_cache_get(pc, "layer A"));
    CHECK(vfi_plan_cache_put(pc, "layer A", "winograd", "dnnl 2.0 ms, winograd 1.0 ms") == 0);
    CHECK(vfi_plan_cache_put(pc, "layer B", "dnnl", "") == 0);
    CHECK(!strcmp(vfi_plan_cache_get(pc, "layer A"), "winograd"));
    CHECK_OK(vfi_plan_cache_close(&pc, &err), err.msg);
    CHECK(pc == NULL);
    check_whole(path, 2);
    pc = vfi_plan_cache_open();
    CHECK(pc && vfi_plan_cache_get(pc, "layer A") && vfi_plan_cache_get(pc, "layer B"));
    CHECK(!strcmp(vfi_plan_cache_get(pc, "layer A"), "winograd"));
    CHECK(vfi_plan_cache_put(pc, "layer A", "direct", "again") == 0); /* a new measurement */
    CHECK_OK(vfi_plan_cache_close(&pc, &err), err.msg);
    pc = vfi_plan_cache_open();
    CHECK(!strcmp(vfi_plan_cache_get(pc, "layer A"), "direct") &&
          !strcmp(vfi_plan_cache_get(pc, "layer B"), "dnnl"));
    CHECK_OK(vfi_plan_cache_close(&pc, &err), err.msg);
    printf("ok a choice put is read back, a new one replaces it, the others are kept\n");
}

static void damaged(const char *path)
{
    static const char *const bad[] = {
        "\x7f"
        "ELF not json at all",
        "{\"something\": \"else\"}",
        "{\"vidfeat_plan_cache\": 1, \"entries\": {\"k\": 7}}",
        "{\"vidfeat_plan_cache\": 1, \"entries\": {\"k\": {\"winner\": [1, 2]}}}",
        "{\"vidfeat_plan_cache\": 1, \"entries\": [1, 2",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]) + 1; i++) {
        if (i < sizeof(bad) / sizeof(bad[0])) {
            write_file(path, bad[i]);
        } else { /* over the bound: 5 MB of spaces before a valid document */
            FILE *f = fopen(path, "w");
            CHECK(f);
            for (int k = 0; k < 5 << 10; k++)
                fputs("                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "                                                                    "
                      "              ",
                      f);
            fputs("{\"vidfeat_plan_cache\": 1, \"entries\": {}}", f);
            CHECK(fclose(f) == 0);
        }
        warnings = 0;
        vf_err err = {0};
        vfi_plan_cache *pc = vfi_plan_cache_open();
        CHECK(pc && warnings == 1);
        CHECK(!vfi_plan_cache_get(pc, "k"));
        CHECK(vfi_plan_cache_put(pc, "k", "direct", "") == 0);
        CHECK_OK(vfi_plan_cache_close(&pc, &err), err.msg);
        check_whole(path, 1);
        pc = vfi_plan_cache_open();
        CHECK(pc && !strcmp(vfi_plan_cache_get(pc, "k"), "direct"));
        CHECK_OK(vfi_plan_cache_close(&pc, &err), err.msg);
        CHECK(warnings == 1);
    }
    printf("ok damaged, foreign and oversized files: one warning each, written anew whole\n");
}

/* Two writers and a reader at once: every read parses. */
static void writers(const char *path)
{
    pid_t kids[3];
    warnings = 0;
    for (int w = 0; w < 3; w++) {
        kids[w] = fork();
        CHECK(kids[w] >= 0);
        if (kids[w] == 0) {
            for (int i = 0; i < 150; i++) {
                if (w == 2) { /* the reader */
                    vf_json *j = NULL;
                    vf_err err = {0};
                    if (vfi_json_load(path, 64 << 20, &j, &err) < 0 && err.code != VF_ERR_IO)
                        _exit(3); /* a file that does not parse: half written */
                    vfi_json_free(&j);
                    continue;
                }
                vf_err err = {0};
                vfi_plan_cache *pc = vfi_plan_cache_open();
                char key[64];
                snprintf(key, sizeof(key), "writer %d layer %d", w, i);
                if (!pc || vfi_plan_cache_put(pc, key, "direct", "x") < 0 ||
                    vfi_plan_cache_close(&pc, &err) < 0)
                    _exit(2);
            }
            _exit(warnings ? 4 : 0);
        }
    }
    for (int w = 0; w < 3; w++) {
        int st = 0;
        CHECK(waitpid(kids[w], &st, 0) == kids[w]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d: status %d", w, st);
    }
    check_whole(path, 1);
    vf_err err = {0};
    vfi_plan_cache *pc = vfi_plan_cache_open();
    CHECK(pc && vfi_plan_cache_get(pc, "writer 0 layer 149") &&
          vfi_plan_cache_get(pc, "writer 1 layer 149"));
    CHECK_OK(vfi_plan_cache_close(&pc, &err), err.msg);
    printf("ok two writers and a reader at once: every file whole, the last of each kept\n");
}

/* The CPU backend capped to AVX2 records its convolutions' choices, and follows the file's. */
static void backend_follows(const char *path)
{
    unlink(path);
    setenv("VIDFEAT_ISA", "avx2", 1);
    vf_isa isa;
    vf_err err = {0};
    CHECK_OK(vfi_isa_get(&isa, &err), err.msg);
    if (isa.level < VF_ISA_AVX2) {
        printf("the backend's use of the cache: not here (no AVX2)\n");
        return;
    }
    vf_graph *g = op_graph_load("conv_wino", 1); /* its second convolution: 32 -> 32, 3x3 */
    char plan[4096];
    float *x = calloc((size_t)vfi_value_sample_numel(&g->values[g->input]), sizeof(float));
    CHECK(x);
    float *y = op_run_described("dnnl", VF_PRECISION_F32, g, 2, x, 1, plan, sizeof(plan));
    free(y);
    vf_json *j = NULL;
    CHECK_OK(vfi_json_load(path, 1 << 20, &j, &err), err.msg);
    const vf_json *entries = vfi_json_get(j, "entries");
    CHECK(vfi_json_is_object(entries));
    /* every entry the run made now says "direct": the next plan must run it so */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CHECK(mem && vfi_json_write(mem, j, 0) == 0 && fclose(mem) == 0);
    vfi_json_free(&j);
    /* rewritten into a new buffer: a winner's name may be shorter than "direct" */
    char *out = NULL;
    size_t out_len = 0;
    FILE *rw = open_memstream(&out, &out_len);
    CHECK(rw);
    int n = 0;
    const char *from = text;
    for (const char *p = strstr(text, "\"winner\":"); p; p = strstr(p + 1, "\"winner\":"), n++) {
        const char *q = strchr(p + 9, '"'), *e = q ? strchr(q + 1, '"') : NULL;
        CHECK(q && e);
        fwrite(from, 1, (size_t)(q + 1 - from), rw);
        fputs("direct", rw);
        from = e;
    }
    fputs(from, rw);
    CHECK(fclose(rw) == 0);
    free(text);
    text = out;
    CHECK_MSG(n > 0, "the backend recorded no choice: %s", text);
    write_file(path, text);
    free(text);
    y = op_run_described("dnnl", VF_PRECISION_F32, g, 2, x, 1, plan, sizeof(plan));
    free(y);
    CHECK_MSG(strstr(plan, "vidfeat:direct_avx2"), "the plan did not follow the cache: %s", plan);
    free(x);
    vfi_graph_free(&g);
    unsetenv("VIDFEAT_ISA");
    printf("ok the backend recorded %d choice%s and followed the file's\n", n, n == 1 ? "" : "s");
}

int main(void)
{
    char dir[] = "/tmp/vidfeat_plans_XXXXXX", path[256];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/sub/plans.json", dir); /* its directory made when needed */
    setenv("VIDFEAT_PLAN_CACHE", path, 1);
    vf_set_log_callback(count_warnings, NULL, VF_LOG_WARNING);
    round_trip(path);
    damaged(path);
    writers(path);
    backend_follows(path);
    unlink(path);
    char lock[300];
    snprintf(lock, sizeof(lock), "%s.lock", path);
    unlink(lock);
    snprintf(path, sizeof(path), "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
    return 0;
}
