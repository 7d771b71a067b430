/*
 * sound.h - an audio model's inputs from a file: its soundtrack (media/audio.h) through the
 * model's log-mel front end (media/logmel.h) cut into patches of `patch` frames every
 * `patch_hop` frames (the manifest's "audio"), one network input [patch, bands] and one vector
 * each. Only whole patches, as the models' references make them: a sound shorter than one gives
 * none. Memory is a patch's and the front end's, whatever the sound's length.
 *
 * Times: log-mel frame i covers the samples from i x hop (centred front ends: i x hop - n_fft / 2,
 * not before the first); patch j holds frames j x patch_hop on. Its t is its first frame's first
 * sample, its t_end its last frame's last sample (not past the sound's end), both in seconds on
 * the file's timeline (the sound's first sample at the audio stream's start, vf_audio_meta); its
 * pts is that first sample's number at the model's rate, from the sound's first.
 */
#ifndef VIDFEAT_SOUND_H
#define VIDFEAT_SOUND_H

#include "engine/manifest.h"
#include "media/audio.h"

typedef struct vf_patches vf_patches;

typedef struct vf_patch {
    int64_t index; /* j */
    int64_t pts;   /* the first sample's number (above) */
    double t, t_end;
} vf_patch;

/* Open path's soundtrack for spec (opts->sample_rate is set from it). Failures as
 * vfi_audio_open's. */
vf_status vfi_patches_open(const char *path, const vf_audio_spec *spec, vf_audio_opts opts,
                           vf_patches **out, vf_err *err);
const vf_audio_meta *vfi_patches_meta(const vf_patches *ps);
/* The next patch: its patch x bands values (frame-major) into x and where it is into *where.
 * VF_EOF after the last; a read failure as vfi_audio_read's. */
vf_status vfi_patches_next(vf_patches *ps, float *x, vf_patch *where, vf_err *err);
/* Seconds of sound read so far. */
double vfi_patches_seconds(const vf_patches *ps);
/* Packets that failed to decode. */
int64_t vfi_patches_errors(const vf_patches *ps);
void vfi_patches_free(vf_patches **pps);

#endif /* VIDFEAT_SOUND_H */
