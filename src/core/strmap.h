/*
 * strmap.h - a string -> int hash map (open addressing, owned keys). Used for tensor names in the
 * graph and by the ONNX loader. Not thread-safe; one owner at a time.
 */
#ifndef VIDFEAT_STRMAP_H
#define VIDFEAT_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "vidfeat.h"

typedef struct vf_strmap vf_strmap;

/* FNV-1a of the string s: the map's hash, and a split that is the same on every machine. */
uint64_t vfi_hash_str(const char *s);

vf_status vfi_strmap_create(vf_strmap **out);
void vfi_strmap_free(vf_strmap **pm);
/* Insert key -> value (the key is copied). VF_ERR_INVALID if the key is already present. */
vf_status vfi_strmap_put(vf_strmap *m, const char *key, int value);
/* The value for key, or `missing`. */
int vfi_strmap_get(const vf_strmap *m, const char *key, int missing);
/* Replace every value v by fn(v, user) (used to renumber after pruning). */
void vfi_strmap_update(vf_strmap *m, int (*fn)(int v, void *user), void *user);

#endif /* VIDFEAT_STRMAP_H */
