/*
 * strmap.c - see strmap.h. FNV-1a hashing, linear probing, grown at half load; no deletion
 * (nothing in vidfeat removes names).
 */
#include "core/strmap.h"

#include <stdint.h>
#include <string.h>

#include "core/mem.h"

typedef struct slot {
    char *key;
    int value;
} slot;

struct vf_strmap {
    slot *slots;
    size_t cap; /* power of two */
    size_t count;
};

uint64_t vfi_hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static slot *lookup(const vf_strmap *m, const char *key)
{
    size_t mask = m->cap - 1;
    for (size_t i = vfi_hash_str(key) & mask;; i = (i + 1) & mask) {
        if (!m->slots[i].key || strcmp(m->slots[i].key, key) == 0)
            return &m->slots[i];
    }
}

static vf_status grow(vf_strmap *m)
{
    size_t new_cap = m->cap ? m->cap * 2 : 64;
    slot *old = m->slots;
    size_t old_cap = m->cap;
    slot *slots = vfi_calloc(new_cap, sizeof(*slots));
    if (!slots)
        return VF_ERR_NOMEM;
    m->slots = slots;
    m->cap = new_cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].key)
            *lookup(m, old[i].key) = old[i];
    }
    vfi_free(old);
    return VF_OK;
}

vf_status vfi_strmap_create(vf_strmap **out)
{
    vf_strmap *m = vfi_calloc(1, sizeof(*m));
    if (!m || grow(m) < 0) {
        vfi_free(m);
        return VF_ERR_NOMEM;
    }
    *out = m;
    return VF_OK;
}

void vfi_strmap_free(vf_strmap **pm)
{
    vf_strmap *m = pm ? *pm : NULL;
    if (!m)
        return;
    for (size_t i = 0; i < m->cap; i++)
        vfi_free(m->slots[i].key);
    vfi_free(m->slots);
    vfi_free(m);
    *pm = NULL;
}

vf_status vfi_strmap_put(vf_strmap *m, const char *key, int value)
{
    if ((m->count + 1) * 2 > m->cap && grow(m) < 0)
        return VF_ERR_NOMEM;
    slot *s = lookup(m, key);
    if (s->key)
        return VF_ERR_INVALID;
    s->key = vfi_strdup(key);
    if (!s->key)
        return VF_ERR_NOMEM;
    s->value = value;
    m->count++;
    return VF_OK;
}

int vfi_strmap_get(const vf_strmap *m, const char *key, int missing)
{
    const slot *s = lookup(m, key);
    return s->key ? s->value : missing;
}

void vfi_strmap_update(vf_strmap *m, int (*fn)(int v, void *user), void *user)
{
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key)
            m->slots[i].value = fn(m->slots[i].value, user);
    }
}
