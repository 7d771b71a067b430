/*
 * held.h - the model rows a database holds vectors of, and the one a configuration chooses
 * (cfg->model, cfg->layer): what vf_db_similar searches and vf_db_read_vectors reads.
 */
#ifndef VIDFEAT_HELD_H
#define VIDFEAT_HELD_H

#include <stdint.h>

#include "vidfeat.h"
#include "core/status.h"
#include "store/store.h"

/* A model row of the database, owned copies of its strings. */
typedef struct vfi_held_model {
    int64_t id;
    char *name, *sha, *layer, *prep;
    int dim, f16;
    int frames; /* a clip model's frames per window (its preprocessing's frames=), else 0 */
    int64_t vectors;
    char *text_sha; /* a CLIP model's text tower (schema 7), NULL when not recorded */
    char *weights;  /* vf_weights_str as recorded (schema 5), NULL when not recorded */
} vfi_held_model;

typedef struct vfi_held {
    vfi_held_model *v;
    int n, cap;
    int nomem;
} vfi_held;

/* Every model row of s that has vectors into *h (zeroed first; vfi_held_free it also on
 * failure). */
vf_status vfi_held_read(vf_store *s, vfi_held *h, vf_err *err);
void vfi_held_free(vfi_held *h);

/* The one row cfg selects (its model by the name the extractor gives a file, its layer; with
 * sound_only, among audio models' rows only), or VF_ERR_STORE naming what db holds: no vectors,
 * none of that model (or no sound), or several to choose from. */
vf_status vfi_held_choose(const vfi_held *h, const vf_config *cfg, int sound_only, const char *db,
                          const vfi_held_model **out, vf_err *err);

/* A done extraction of a row, and how many vectors it holds. */
typedef struct vfi_held_extraction {
    int64_t id, vectors;
} vfi_held_extraction;

/* The done extractions of row in s, in the store's order, into *out (a new array to vfi_free,
 * NULL when none) of *n, and their vectors in all into *total; no vector is read. */
vf_status vfi_held_extractions(vf_store *s, const vfi_held_model *row, vfi_held_extraction **out,
                               int *n, int64_t *total, vf_err *err);

/* Said once (a warning) before a search of row's vectors of db when they are random weights'
 * (made for tests): their similarities mean nothing, whatever they look like. */
void vfi_held_warn_weights(const vfi_held_model *row, const char *db);

#endif /* VIDFEAT_HELD_H */
