/*
 * inputs.c - what the command line names: files, directories walked for media, databases.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "store/store.h"

static int add_path(path_list *l, const char *path)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **items = realloc(l->items, (size_t)cap * sizeof(char *));
        if (!items)
            return -1;
        l->items = items;
        l->cap = cap;
    }
    if (!(l->items[l->n] = strdup(path)))
        return -1;
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Media files under dir, recursively, in name order; media is recognised by probing. */
static int walk(path_list *l, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "vidfeat: %s: cannot read directory\n", dir);
        return 1;
    }
    path_list here = {0};
    struct dirent *e;
    int failed = 0;
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/"; /* "dir/" on the line */
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s%s%s", dir, sep, e->d_name) >= (int)sizeof(path))
            continue;
        if (add_path(&here, path) < 0)
            failed = 1;
    }
    closedir(d);
    qsort(here.items, (size_t)here.n, sizeof(char *), cmp_str);
    for (int i = 0; i < here.n; i++) {
        struct stat st;
        if (stat(here.items[i], &st) != 0)
            continue;
        /* Zero-byte files are kept so that they are reported as failed: in an archive they
         * are broken media far more often than anything else. */
        if (S_ISDIR(st.st_mode) && depth < 64)
            failed |= walk(l, here.items[i], depth + 1);
        else if (S_ISREG(st.st_mode) && (st.st_size == 0 || vf_probe_media(here.items[i])))
            failed |= add_path(l, here.items[i]) < 0;
        free(here.items[i]);
    }
    free(here.items);
    return failed;
}

void cli_free_paths(path_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int cli_collect_inputs(int argc, char **argv, path_list *inputs)
{
    int status = EXIT_OK;
    for (int i = 0; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            int before = inputs->n;
            if (walk(inputs, argv[i], 0))
                status = EXIT_FAIL;
            if (inputs->n == before) {
                fprintf(stderr, "vidfeat: %s: no media files in this directory\n", argv[i]);
                status = EXIT_FAIL;
            }
        } else if (add_path(inputs, argv[i]) < 0) {
            fprintf(stderr, "vidfeat: out of memory\n");
            return EXIT_FAIL;
        }
    }
    return status;
}

int cli_db_exists(const char *path)
{
    struct stat st;
    if (vfi_store_uri_scheme(path) || stat(path, &st) == 0)
        return 1;
    fprintf(stderr, "vidfeat: %s: no such database\n", path);
    return 0;
}
