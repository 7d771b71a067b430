/*
 * audio.h - a file's soundtrack for an audio model: its best audio stream decoded, every channel
 * averaged into one (the mean of all channels, as VGGish's and PANNs' references downmix) and
 * resampled to the model's rate by libswresample, handed out as mono float samples in order.
 *
 * Time: sample k is at start + k / rate seconds, start being the stream's first presentation
 * time on the file's timeline (0 at the file's start time, where frames' t is 0 too). Where the
 * stream's timestamps jump ahead of the samples (a gap) silence is inserted, where they fall
 * behind samples are dropped, by libswresample's own compensation ("async"), so that the count
 * keeps to the timestamps.
 */
#ifndef VIDFEAT_AUDIO_H
#define VIDFEAT_AUDIO_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/path.h"
#include "core/status.h"

typedef struct vf_audio_opts {
    int sample_rate;           /* Hz wanted (1000 .. 384000) */
    double stall_timeout;      /* seconds without data before giving up; 0 = never */
    const atomic_int *cancel;  /* (optional) non-zero interrupts reading at once */
    const vf_archive *archive; /* (optional, borrowed) as vf_decode_opts.archive */
    int max_streams;           /* 0: VF_DEFAULT_MAX_STREAMS */
} vf_audio_opts;

typedef struct vf_audio_meta {
    int stream_index;
    char codec[32];
    int in_rate;     /* the stream's sample rate */
    int channels;    /* averaged into one */
    double origin;   /* seconds: the file's start time, where t is 0 (as vf_video_meta's) */
    double start;    /* seconds: the first sample's time (see above) */
    double duration; /* the stream's declared seconds; 0 when unknown */
} vf_audio_meta;

typedef struct vf_audio vf_audio;

/* Open path's best audio stream. VF_ERR_IO (cannot open), VF_ERR_DECODE (not media, "no audio
 * stream", a stream of impossible rate or channels, no decoder), VF_ERR_DENIED (it refers to a
 * file outside its archive), VF_ERR_UNSUPPORTED (not a regular file: a pipe's sound cannot be
 * read a second time beside its pictures). */
vf_status vfi_audio_open(const char *path, const vf_audio_opts *opts, vf_audio **out, vf_err *err);
const vf_audio_meta *vfi_audio_meta(const vf_audio *a);
/* Up to max samples into buf (*got of them). VF_EOF (and *got 0) at the end of the stream;
 * VF_ERR_DECODE on a read error or a stall (a corrupt packet is skipped and counted). */
vf_status vfi_audio_read(vf_audio *a, float *buf, int max, int *got, vf_err *err);
/* Packets that failed to decode so far. */
int64_t vfi_audio_errors(const vf_audio *a);
void vfi_audio_free(vf_audio **pa);

#endif /* VIDFEAT_AUDIO_H */
