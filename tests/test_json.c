/*
 * test_json.c - core/json.c over jansson: where a parse error is, duplicate keys refused, the
 * getters' types, floats written so that they read back the same, reals rounded, and a file
 * name with bytes that are not UTF-8 written as ASCII escapes that decode back to the bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"
#include "core/json.h"

/* v written on one line, without the newline; the caller frees it. */
static char *written(const vf_json *v)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    CHECK(f);
    CHECK_EQ(vfi_json_write(f, v, 0), 0);
    fclose(f);
    CHECK(size > 0 && buf[size - 1] == '\n');
    buf[size - 1] = '\0';
    return buf;
}

static int count_member(void *user, const char *key, const vf_json *v)
{
    (void)key, (void)v;
    ++*(int *)user;
    return 0;
}

int main(void)
{
    vf_json *j = NULL;
    vf_err err;
    const char *bad = "{\"a\": 1,\n \"b\": }";
    CHECK(vfi_json_parse(bad, strlen(bad), &j, &err) == VF_ERR_INVALID && !j);
    CHECK_MSG(strstr(err.msg, "json 2:") == err.msg, "%s", err.msg);
    const char *dup = "{\"a\": 1, \"a\": 2}";
    CHECK(vfi_json_parse(dup, strlen(dup), &j, &err) == VF_ERR_INVALID);

    const char *doc = "{\"n\": 3, \"x\": 1e300, \"s\": \"t\\u00e9\", \"a\": [1, 2.5, \"no\"],"
                      " \"o\": {\"p\": 1, \"q\": 2}}";
    CHECK(vfi_json_parse(doc, strlen(doc), &j, &err) == VF_OK);
    CHECK(vfi_json_num(j, "n", -1) == 3 && vfi_json_num(j, "s", -1) == -1);
    CHECK(!strcmp(vfi_json_str(j, "s", ""), "t\xc3\xa9") && !vfi_json_str(j, "n", NULL));
    float f;
    CHECK(!vfi_json_float(vfi_json_get(j, "x"), &f)); /* beyond a float */
    CHECK(vfi_json_array_len(vfi_json_get(j, "a")) == 3 && vfi_json_array_len(j) == -1);
    CHECK(vfi_json_float(vfi_json_at(vfi_json_get(j, "a"), 1), &f) && f == 2.5f);
    CHECK(!vfi_json_float(vfi_json_at(vfi_json_get(j, "a"), 2), &f));
    CHECK(!vfi_json_at(vfi_json_get(j, "a"), 3));
    int members = 0;
    CHECK(vfi_json_each(vfi_json_get(j, "o"), count_member, &members) == 0 && members == 2);
    CHECK(vfi_json_is_object(j) && !vfi_json_is_object(vfi_json_get(j, "a")));
    vfi_json_free(&j);
    CHECK(!j);

    vf_json *o = vfi_json_new_object(), *arr = vfi_json_new_array();
    CHECK(o && arr);
    CHECK_EQ(vfi_json_add_str(o, "name", "d\xe9j\xe0 \xff.mp4"), 0); /* Latin-1 bytes */
    CHECK_EQ(vfi_json_add_str(o, "utf8", "caf\xc3\xa9"), 0);
    CHECK_EQ(vfi_json_add_real(o, "fps", 12.3456, 2), 0);
    CHECK_EQ(vfi_json_add_float(o, "f", 0.1f), 0);
    CHECK_EQ(vfi_json_add_real(o, "nan", 0.0 / 0.0, 2), 0);
    CHECK_EQ(vfi_json_add_str(o, "none", NULL), 0);
    CHECK_EQ(vfi_json_add(o, "arr", arr), 0);
    CHECK_EQ(vfi_json_push_float(arr, 1.0f / 3.0f), 0);
    CHECK_EQ(vfi_json_add(NULL, "x", vfi_json_new_array()), -1); /* taken over and freed */
    char *text = written(o);
    const char *want = "{\"name\":\"d\\uDCE9j\\uDCE0 \\uDCFF.mp4\",\"utf8\":\"caf\\u00E9\","
                       "\"fps\":12.35,\"f\":0.100000001,\"nan\":null,\"none\":null,"
                       "\"arr\":[0.333333343]}";
    CHECK_MSG(!strcmp(text, want), "%s\nwant %s", text, want);
    /* jansson reads no lone surrogate back; the floats read back as the same floats */
    CHECK(vfi_json_parse(text, strlen(text), &j, &err) == VF_ERR_INVALID);
    free(text);
    CHECK(json_object_del(o, "name") == 0);
    text = written(o);
    CHECK(vfi_json_parse(text, strlen(text), &j, &err) == VF_OK);
    CHECK(vfi_json_float(vfi_json_get(j, "f"), &f) && f == 0.1f);
    CHECK(vfi_json_float(vfi_json_at(vfi_json_get(j, "arr"), 0), &f) && f == 1.0f / 3.0f);
    vfi_json_free(&j);
    free(text);
    vfi_json_free(&o);
    printf("json: errors located, duplicates refused, floats exact, stray bytes as \\uDCXX\n");
    return 0;
}
