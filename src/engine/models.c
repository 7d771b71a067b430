/*
 * models.c - the public model list (vf_model_list_*, vidfeat models): every manifest in the
 * search directories, the first of a name winning, with where its ONNX file was found and whose
 * weights it has (hashed once per file version, through the digest cache).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "engine/manifest.h"
#include "vidfeat.h"

typedef struct list_item {
    vf_model_entry entry;
    vf_manifest *m;
    char *found, *text_found;
    char *layers;
    char *get;
} list_item;

struct vf_model_list {
    list_item *items;
    size_t n;
};

static vf_status add_listed(vf_model_list *list, vf_manifest *m, const char *models_dir)
{
    for (size_t i = 0; i < list->n; i++) {
        if (!strcmp(list->items[i].m->name, m->name))
            return VF_ERR_INVALID; /* shadowed by an earlier directory */
    }
    list_item *items = vfi_realloc(list->items, (list->n + 1) * sizeof(*items));
    if (!items)
        return VF_ERR_NOMEM;
    list->items = items;
    list_item *it = &items[list->n];
    memset(it, 0, sizeof(*it));
    it->layers = vfi_malloc(1024);
    if (!it->layers)
        return VF_ERR_NOMEM;
    it->layers[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < m->n_layers && len < 1024; i++)
        len += (size_t)snprintf(it->layers + len, 1024 - len, "%s%s:%d", i ? " " : "",
                                m->layers[i].name, m->layers[i].dim);
    it->m = m;
    it->found = vfi_manifest_locate_file(models_dir, m);
    it->entry.name = m->name;
    it->entry.manifest = m->path;
    it->entry.file = m->file;
    it->entry.found = it->found;
    it->entry.layers = it->layers;
    it->entry.description = m->description ? m->description : "";
    it->entry.input_size = m->input_size;
    it->entry.frames = m->frames;
    if (m->audio) {
        const vf_logmel_cfg *a = &m->audio->front;
        it->entry.sample_rate = a->sample_rate;
        it->entry.patch_seconds = (double)m->audio->patch * a->hop / a->sample_rate;
    }
    it->entry.weights = it->found ? vfi_model_weights(m, it->found) : VF_WEIGHTS_UNKNOWN;
    if (m->text) {
        it->text_found = vfi_manifest_locate(models_dir, m, m->text->file);
        it->entry.text_file = m->text->file;
        it->entry.text_found = it->text_found;
    }
    size_t get_size =
        strlen(m->name) + strlen(m->file) + (m->export_hint ? strlen(m->export_hint) : 0) + 96;
    if (!(it->get = vfi_malloc(get_size))) {
        vfi_free(it->layers);
        vfi_free(it->found);
        vfi_free(it->text_found);
        return VF_ERR_NOMEM;
    }
    if (m->url)
        snprintf(it->get, get_size, "scripts/fetch-models.sh %s", m->name);
    else if (m->export_hint)
        snprintf(it->get, get_size, "%s", m->export_hint);
    else /* neither downloaded nor exported: a file the user has */
        snprintf(it->get, get_size, "no download: put your copy of %s in ./models or --models-dir",
                 m->file);
    it->entry.get = it->get;
    list->n++;
    return VF_OK;
}

typedef struct list_visit {
    vf_model_list *list;
    const char *models_dir;
} list_visit;

static vf_status list_one(void *user, vf_manifest *m)
{
    list_visit *v = user;
    vf_status rc = add_listed(v->list, m, v->models_dir);
    if (rc < 0)
        vfi_manifest_free(&m);
    return rc == VF_ERR_NOMEM ? rc : VF_OK; /* a shadowed name is not an error */
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const list_item *)a)->m->name, ((const list_item *)b)->m->name);
}

vf_status vf_model_list_create(const char *models_dir, vf_model_list **out)
{
    if (!out)
        return VF_ERR_INVALID;
    vf_model_list *list = vfi_calloc(1, sizeof(*list));
    if (!list)
        return VF_ERR_NOMEM;
    list_visit v = {list, models_dir};
    vf_status rc = vfi_manifest_foreach(models_dir, list_one, &v);
    if (rc < 0) {
        vf_model_list_free(&list);
        return rc;
    }
    if (list->n > 1) /* by name, whatever order the directories list them in */
        qsort(list->items, list->n, sizeof(*list->items), by_name);
    *out = list;
    return VF_OK;
}

size_t vf_models_search_path(const char *models_dir, char *buf, size_t size)
{
    const char *dirs[VF_MAX_SEARCH_DIRS];
    char env[4096];
    int n = vfi_models_search_path(models_dir, dirs, env, sizeof(env));
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s%s",
                         i ? ":" : "", dirs[i]);
        len += w > 0 ? (size_t)w : 0;
    }
    return len;
}

size_t vf_model_list_count(const vf_model_list *list)
{
    return list ? list->n : 0;
}

const vf_model_entry *vf_model_list_get(const vf_model_list *list, size_t i)
{
    return list && i < list->n ? &list->items[i].entry : NULL;
}

void vf_model_list_free(vf_model_list **plist)
{
    vf_model_list *list = plist ? *plist : NULL;
    if (!list)
        return;
    for (size_t i = 0; i < list->n; i++) {
        vfi_manifest_free(&list->items[i].m);
        vfi_free(list->items[i].found);
        vfi_free(list->items[i].layers);
        vfi_free(list->items[i].text_found);
        vfi_free(list->items[i].get);
    }
    vfi_free(list->items);
    vfi_free(list);
    *plist = NULL;
}
