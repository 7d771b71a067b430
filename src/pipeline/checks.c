/*
 * checks.c - what a pipeline's configuration may ask of the model it opened (stages.h): windows
 * for a clip model only, no frame sampling for an audio model, shots from pictures decoded
 * whole, and batches that fit the memory this process may use.
 */
#include <string.h>

#include "core/mem.h"
#include "pipeline/stages.h"

/* A clip model's windows as cfg asks for them (window.h), or an image model asked for none. */
vf_status vfi_pl_check_window(vf_pipeline *p, const vf_config *cfg)
{
    if (cfg->window < 0 || cfg->window_stride < 0)
        return vfi_fail(&p->err, VF_ERR_INVALID, "invalid window settings");
    if (!p->info.frames && (cfg->window || cfg->window_stride))
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "%s takes single frames: --window and --window-stride are for clip "
                        "models (docs/models.md)",
                        p->info.name);
    if (!p->info.frames)
        return VF_OK;
    if (cfg->window && cfg->window != p->info.frames)
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "%s takes windows of %d frames, not %d (its file fixes them: export it "
                        "again for another length)",
                        p->info.name, p->info.frames, cfg->window);
    if (cfg->no_overlap)
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "the per-frame baseline (no overlap) is for image models");
    p->window_stride = cfg->window_stride ? cfg->window_stride : p->info.frames;
    return VF_OK;
}

/* An audio model takes every patch of a file's sound (those starting from --start, within
 * --duration): the frames' sampling does not apply. */
vf_status vfi_pl_check_sound(vf_pipeline *p, const vf_config *cfg)
{
    const char *which = cfg->sample_fps > 0                 ? "--fps"
                        : cfg->every > 1                    ? "--every"
                        : cfg->keyframes                    ? "--keyframes"
                        : cfg->window || cfg->window_stride ? "--window"
                        : cfg->no_overlap                   ? "the per-frame baseline"
                        : cfg->hwdec && *cfg->hwdec && strcmp(cfg->hwdec, "none") ? "--hwdec"
                                                                                  : NULL;
    if (which)
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "%s takes every patch of a file's sound (%d log-mel frames, a vector "
                        "each): %s is for pictures",
                        p->info.name, p->audio->patch, which);
    return VF_OK;
}

/* The batch inputs a run holds (make_run's pools, for as many lanes as it may open, and the
 * windows' rings) against the memory this process may use: a batch too large is refused as
 * the run starts, saying what fits, rather than committed (the machine swapping) and failed
 * midway. */
#define BATCH_MEMORY_SHARE 0.5 /* of the usable memory the batch inputs may take */

vf_status vfi_pl_check_batch_memory(vf_pipeline *p)
{
    int depth = p->cfg.queue_depth > 0 ? p->cfg.queue_depth : DEFAULT_QUEUE_DEPTH;
    double batches = depth + 2 + p->lanes_wanted;
    double row = (double)vfi_pl_row_floats(p) * sizeof(float);
    double ring = p->info.frames ? (double)p->lanes_wanted * p->info.frames *
                                       (double)vfi_pl_slot_floats(p) * sizeof(float)
                                 : 0.0;
    double need = batches * p->info.batch_size * row + ring, usable = vfi_mem_usable();
    if (usable <= 0.0 || need <= BATCH_MEMORY_SHARE * usable)
        return VF_OK;
    double fits = (BATCH_MEMORY_SHARE * usable - ring) / (batches * row);
    const char *what = p->info.frames ? "windows" : p->audio ? "patches" : "frames";
    return vfi_fail(&p->err, VF_ERR_NOMEM,
                    "%s: a batch of %d %s: the %.0f batches in flight take %.1f GB, more than "
                    "half of the %.1f GB this process may use; a batch of %d or fewer fits "
                    "(--batch)",
                    p->info.path ? p->info.path : "the model", p->info.batch_size, what, batches,
                    need / 1e9, usable / 1e9, fits < 1.0 ? 0 : (int)fits);
}

/* Shots are found from every decoded frame (media/shots.h): not with key frames alone, nor
 * from an audio model's sound; their options in range. */
vf_status vfi_pl_check_shots(vf_pipeline *p, const vf_config *cfg)
{
    if (!(cfg->shot_threshold >= 0.0 && cfg->shot_threshold <= 255.0))
        return vfi_fail(&p->err, VF_ERR_INVALID, "the shot threshold must be 0 to 255");
    p->shot_opts =
        (vf_shot_opts){.threshold = cfg->shot_threshold, .min_frames = cfg->shot_min_frames};
    if (!cfg->shots)
        return VF_OK;
    if (cfg->keyframes)
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "shots are found from every frame, and key frames alone are decoded: "
                        "sample by fps or every frame instead");
    if (p->audio)
        return vfi_fail(&p->err, VF_ERR_INVALID,
                        "%s is an audio model: shots are found in pictures, which it does not "
                        "read (leave out --shots)",
                        p->info.name);
    return VF_OK;
}
