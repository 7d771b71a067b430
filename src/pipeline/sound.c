/*
 * sound.c - an audio model's patches of a file's soundtrack (sound.h): samples read in blocks
 * into the front end, its frames gathered into a patch's rows; a patch goes out when its last
 * frame is in, and the next one's rows it shares (patch_hop < patch) move up.
 */
#include "pipeline/sound.h"

#include <string.h>

#include "core/mem.h"

#define BLOCK 4096 /* samples read at a time */

struct vf_patches {
    vf_audio_spec spec;
    vf_audio *audio;
    vf_logmel *front;
    float *block;
    float *rows; /* patch x bands: the next patch's first `have` frames */
    int have;
    int64_t frame;   /* the next frame's number */
    int64_t next;    /* the next patch's number */
    int64_t samples; /* read so far */
    int ended;       /* the sound has ended (and the front end been told) */
};

vf_status vfi_patches_open(const char *path, const vf_audio_spec *spec, vf_audio_opts opts,
                           vf_patches **out, vf_err *err)
{
    *out = NULL;
    vf_patches *ps = vfi_calloc(1, sizeof(*ps));
    if (!ps)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    ps->spec = *spec;
    int bands = spec->front.n_mels;
    ps->block = vfi_mallocarray(BLOCK, sizeof(float));
    ps->rows = vfi_mallocarray((size_t)spec->patch * (size_t)bands, sizeof(float));
    vf_status rc = ps->block && ps->rows ? VF_OK : vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    opts.sample_rate = spec->front.sample_rate;
    if (rc >= 0)
        rc = vfi_logmel_new(&spec->front, &ps->front, err);
    if (rc >= 0)
        rc = vfi_audio_open(path, &opts, &ps->audio, err);
    if (rc < 0) {
        vfi_patches_free(&ps);
        return rc;
    }
    *out = ps;
    return VF_OK;
}

const vf_audio_meta *vfi_patches_meta(const vf_patches *ps)
{
    return vfi_audio_meta(ps->audio);
}

double vfi_patches_seconds(const vf_patches *ps)
{
    return (double)ps->samples / ps->spec.front.sample_rate;
}

int64_t vfi_patches_errors(const vf_patches *ps)
{
    return vfi_audio_errors(ps->audio);
}

void vfi_patches_free(vf_patches **pps)
{
    vf_patches *ps = *pps;
    if (!ps)
        return;
    vfi_audio_free(&ps->audio);
    vfi_logmel_free(&ps->front);
    vfi_free(ps->block);
    vfi_free(ps->rows);
    vfi_free(ps);
    *pps = NULL;
}

/* The next log-mel frame into the patch's rows (or past it, when patch_hop skips frames):
 * VF_OK, VF_EOF at the end of the sound, or a read failure. */
static vf_status next_frame(vf_patches *ps, vf_err *err)
{
    const vf_audio_spec *s = &ps->spec;
    int bands = s->front.n_mels;
    float scratch[VF_MAX_MELS];              /* a frame no patch holds */
    int64_t start = ps->next * s->patch_hop; /* the next patch's first frame */
    for (;;) {
        float *dst = ps->frame >= start ? ps->rows + (size_t)ps->have * bands : scratch;
        if (vfi_logmel_next(ps->front, dst)) {
            if (ps->frame++ >= start)
                ps->have++;
            return VF_OK;
        }
        if (ps->ended)
            return VF_EOF;
        int got = 0;
        vf_status rc = vfi_audio_read(ps->audio, ps->block, BLOCK, &got, err);
        if (rc == VF_EOF) {
            vfi_logmel_end(ps->front);
            ps->ended = 1;
            continue;
        }
        if (rc < 0)
            return rc;
        ps->samples += got;
        if ((rc = vfi_logmel_push(ps->front, ps->block, got, err)) < 0)
            return rc;
    }
}

vf_status vfi_patches_next(vf_patches *ps, float *x, vf_patch *where, vf_err *err)
{
    const vf_audio_spec *s = &ps->spec;
    const vf_logmel_cfg *f = &s->front;
    int bands = f->n_mels;
    while (ps->have < s->patch) {
        vf_status rc = next_frame(ps, err);
        if (rc < 0 || rc == VF_EOF)
            return rc; /* a partial patch is dropped, as the references drop it */
    }
    memcpy(x, ps->rows, sizeof(float) * (size_t)s->patch * bands);
    int64_t a = ps->next * s->patch_hop, b = a + s->patch - 1;
    int64_t pad = f->center ? f->n_fft / 2 : 0;
    int64_t from = a * f->hop - pad, to = b * f->hop - pad + f->window;
    from = from < 0 ? 0 : from;
    to = ps->ended && to > ps->samples ? ps->samples : to;
    double start = vfi_audio_meta(ps->audio)->start;
    where->index = ps->next;
    where->pts = from;
    where->t = start + (double)from / f->sample_rate;
    where->t_end = start + (double)to / f->sample_rate;
    /* the next patch: keep the rows it shares with this one */
    ps->next++;
    int keep = s->patch_hop < s->patch ? s->patch - s->patch_hop : 0;
    if (keep)
        memmove(ps->rows, ps->rows + (size_t)(s->patch - keep) * bands,
                sizeof(float) * (size_t)keep * bands);
    ps->have = keep;
    return VF_OK;
}
