/*
 * logmel.h - an audio model's front end: a mono signal at the model's sample rate into frames of
 * log mel-band energies, computed as the model's reference computes them (VGGish's mel_features;
 * PANNs' torchlibrosa, which is librosa's and torchaudio's arithmetic). Streaming: samples are
 * pushed as they are decoded and frames come out as soon as the samples they cover are in, so
 * memory is a window's whatever the signal's length. Arithmetic in double (FFTW), out in float.
 */
#ifndef VIDFEAT_LOGMEL_H
#define VIDFEAT_LOGMEL_H

#include <stdint.h>

#include "core/status.h"

/* Where the mel scale's bands sit, and over which axis their triangles are drawn. */
typedef enum vf_mel_scale {
    VF_MEL_HTK,    /* mel = 1127 ln(1 + f / 700) */
    VF_MEL_SLANEY, /* linear to 1 kHz (f / (200/3)), logarithmic above (Auditory Toolbox) */
} vf_mel_scale;

typedef enum vf_mel_log {
    VF_MEL_LN_OFFSET, /* ln(mel + log_offset) (VGGish: 0.01) */
    VF_MEL_DB,        /* 10 log10(max(mel, log_offset)) (librosa's power_to_db, ref 1, amin) */
} vf_mel_log;

#define VF_MAX_MELS 1024 /* mel bands a front end may have */

/* A front end as a model's manifest states it ("audio"). */
typedef struct vf_logmel_cfg {
    int sample_rate; /* Hz of the signal given */
    int window;      /* samples a frame covers: a periodic Hann window this long */
    int hop;         /* samples between frames' starts */
    int n_fft;       /* the transform's length (>= window; the frame zero-padded at its end) */
    /* Frames centred on i x hop: the signal extended by n_fft / 2 samples reflected at each end
     * (torch.stft's center=True, pad_mode "reflect"; window == n_fft). 0: frame i starts at
     * i x hop and only whole frames count (VGGish). */
    int center;
    int power; /* 1: magnitude |X|, 2: power |X|^2 */
    int n_mels;
    double fmin, fmax; /* Hz: the lowest band's lower edge, the highest band's upper edge */
    vf_mel_scale scale;
    /* The triangles drawn over mel (VGGish's mel_features) instead of Hz (librosa,
     * torchaudio); VGGish also gives the transform's DC bin no weight. */
    int triangles_in_mel;
    int slaney_norm; /* each band scaled by 2 / its width in Hz (librosa's norm="slaney") */
    vf_mel_log log;
    double log_offset;
} vf_logmel_cfg;

/* Is cfg one this front end computes? "" when it is, else what is wrong with it (static). */
const char *vfi_logmel_check(const vf_logmel_cfg *cfg);

/* How many frames a signal of n samples makes (all of it given). */
int64_t vfi_logmel_count(const vf_logmel_cfg *cfg, int64_t n);

typedef struct vf_logmel vf_logmel;

/* A front end for cfg (copied). VF_ERR_INVALID with vfi_logmel_check's reason; VF_ERR_NOMEM. */
vf_status vfi_logmel_new(const vf_logmel_cfg *cfg, vf_logmel **out, vf_err *err);
void vfi_logmel_free(vf_logmel **pm);
/* n more samples of the signal (copied). VF_ERR_NOMEM. */
vf_status vfi_logmel_push(vf_logmel *m, const float *x, int64_t n, vf_err *err);
/* The signal has ended: the frames its end completes (and, centred, the reflected tail) follow. */
void vfi_logmel_end(vf_logmel *m);
/* The next frame's n_mels values into out: 1, or 0 when it needs samples not yet pushed (or,
 * after vfi_logmel_end, when all vfi_logmel_count frames are out). Frame i covers the signal's
 * samples from i x hop (centred: i x hop - n_fft / 2) on. */
int vfi_logmel_next(vf_logmel *m, float *out);

#endif /* VIDFEAT_LOGMEL_H */
