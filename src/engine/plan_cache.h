/*
 * plan_cache.h - which implementation ran a layer fastest on this machine, kept between runs (as
 * FFTW's wisdom and cuDNN's benchmark mode keep theirs): entries keyed by the CPU's model, the
 * instructions in use, the thread count, the layer's shape and precision, each the name of the
 * winner and what each candidate took. One JSON file, $XDG_CACHE_HOME/vidfeat/plans.json (or
 * ~/.cache/vidfeat/plans.json; VIDFEAT_PLAN_CACHE names another, "off" keeps none), read when a
 * plan is made and written back, merged with what another process wrote meanwhile, by a rename:
 * safe to delete (it is measured again), safe when two workers write it at once (they take
 * turns, each writing a whole file), a corrupt or foreign file is set aside with one warning and
 * made anew. Used by the thread that plans; not shared.
 */
#ifndef VIDFEAT_PLAN_CACHE_H
#define VIDFEAT_PLAN_CACHE_H

#include "core/status.h"

typedef struct vfi_plan_cache vfi_plan_cache;

/* The cache as the file holds it now: empty when there is none or it is off; when it cannot be
 * read (permissions) empty and kept nowhere; when it is damaged or not ours empty, said with one
 * warning, and written anew at close. NULL only when out of memory. */
vfi_plan_cache *vfi_plan_cache_open(void);
/* The winner recorded for key, or NULL. Borrowed until the next put or close. */
const char *vfi_plan_cache_get(const vfi_plan_cache *pc, const char *key);
/* Record key's winner and what the candidates took (detail: "dnnl 3.10 ms, direct 1.92 ms").
 * -1 when out of memory (the choice is then only not kept). */
int vfi_plan_cache_put(vfi_plan_cache *pc, const char *key, const char *winner, const char *detail);
/* Write what was put (merged into the file as it is now), then free; NULL is fine. VF_ERR_NOMEM
 * (err) when memory ran out for it; a file that cannot be written is one warning, and VF_OK. */
vf_status vfi_plan_cache_close(vfi_plan_cache **ppc, vf_err *err);

#endif /* VIDFEAT_PLAN_CACHE_H */
