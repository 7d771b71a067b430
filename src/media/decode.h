/*
 * decode.h - demux and decode one video stream, sampling frames as early as possible. The only
 * module (with preprocess.c) that sees FFmpeg types; frames travel through the pipeline as
 * vf_frame, whose AVFrame only decode.c and preprocess.c look into.
 */
#ifndef VIDFEAT_DECODE_H
#define VIDFEAT_DECODE_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/path.h"
#include "core/status.h"
#include "media/ffmpeg.h"
#include "media/hwdev.h"
#include "media/shots.h"

/* Which frames to keep. */
typedef struct vf_sampling {
    double fps;         /* > 0: at most this many frames per second, by presentation time */
    int every;          /* >= 1: every Nth decoded frame */
    int keyframes;      /* only key frames; the decoder never sees the others */
    double start;       /* seconds from the start of the file's timeline */
    double duration;    /* seconds after start; 0 = to the end */
    int64_t max_frames; /* 0 = no limit */
} vf_sampling;

/* Facts about the chosen video stream. */
typedef struct vf_video_meta {
    int width, height; /* coded size, before rotation */
    int rotation;      /* clockwise degrees (0, 90, 180, 270) that make the picture upright */
    int stream_index;
    int n_video_streams;
    char codec[32];
    char pix_fmt[32];
    double frame_rate; /* average (or nominal) frames per second; 0 when unknown */
    double duration;   /* seconds; 0 when unknown */
    int64_t nb_frames; /* frames the container declares; 0 when it does not say */
    double start_time; /* seconds: the timeline origin that t is measured from */
    char hwdec[16];    /* "cuda" when the frames are decoded there, "" on the CPU */
} vf_video_meta;

/* One decoded frame. */
typedef struct vf_frame {
    void *av;      /* AVFrame; owned by this struct */
    int64_t index; /* 0-based frame number in presentation order (see decode.c) */
    int64_t pts;   /* best-effort presentation timestamp, in the stream's time base */
    double t;      /* seconds since meta.start_time */
} vf_frame;

typedef struct vf_decoder vf_decoder;

typedef struct vf_decode_opts {
    int threads;              /* codec threads; 0 = automatic */
    double stall_timeout;     /* seconds without a decoded frame before giving up; 0 = never */
    const atomic_int *cancel; /* (optional) non-zero interrupts reading at once */
    /* (optional, borrowed) decode on this device where it supports the stream's codec and
     * profile, else on the CPU (meta.hwdec says which): the same pixels as software decoding
     * (H.264, HEVC, VP9, AV1 decoders are exact). Kept frames are copied back to system memory
     * unless keep_on_device. */
    vf_hwdev *hw;
    /* Leave hw's frames in device memory (vfi_frame_on_device), for a GPU that converts them
     * where they are; vfi_frame_download brings one back when needed. FFmpeg copies each out of
     * the decoder's surfaces, so holding frames costs device memory, not decoding surfaces. */
    int keep_on_device;
    /* (optional, borrowed) where the input's references may lead (docs/archives.md "What vidfeat
     * reads"): an HLS playlist's segments and keys, a DASH manifest's, a concat list's entries, an
     * image sequence's other images. NULL: the directory of the path opened, its links not followed
     * out of it. A reference outside fails the input with VF_ERR_DENIED, "refers to a file
     * outside the archive: REF", once it is met (vectors of it may have been handed out). */
    const vf_archive *archive;
    /* Limits on what the input may cost; 0: VF_DEFAULT_MAX_PIXELS, VF_DEFAULT_MAX_STREAMS.
     * A frame larger, or a file with more streams, fails with VF_ERR_DECODE naming the limit. */
    int64_t max_pixels;
    int max_streams;
    /* (optional, borrowed) look for cuts (media/shots.h) with these options: every frame of the
     * window is then decoded (sampling skips none) and measured, including frames on a device
     * (copied back); vfi_decoder_shots gives the shots after the end. */
    const vf_shot_opts *shots;
} vf_decode_opts;

#define VF_DEFAULT_MAX_PIXELS  40000000
#define VF_DEFAULT_MAX_STREAMS 64

/* Open path and its best video stream; opts may be NULL (defaults). VF_ERR_IO (cannot open),
 * VF_ERR_DECODE (not media, no video stream, unsupported codec, stalled), VF_ERR_DENIED (it
 * refers to a file outside its archive). Only the file protocol is used, whatever path says:
 * "http://x" or "file:y" name files of those names. */
vf_status vfi_decoder_open(const char *path, const vf_sampling *sampling,
                           const vf_decode_opts *opts, vf_decoder **out, vf_err *err);
const vf_video_meta *vfi_decoder_meta(const vf_decoder *d);
/* The next sampled frame into f (its previous picture is released); t only increases. VF_EOF at
 * the end of the stream or of the sampling window (a stream cut short ends so too, with a
 * vfi_decoder_note); VF_ERR_DECODE when nothing decodes, on a read error, or a stall. */
vf_status vfi_decoder_next(vf_decoder *d, vf_frame *f, vf_err *err);
/* Frames decoded so far (sampled or not) and packets that failed to decode. */
void vfi_decoder_counts(const vf_decoder *d, int64_t *decoded, int64_t *errors);
/* After VF_EOF: "" for a whole file, else one line on what it lacked ("partial: 5 of 20 frames
 * the index promises", "3 corrupt packets skipped", a --start past its end). Borrowed. */
const char *vfi_decoder_note(const vf_decoder *d);
/* After VF_EOF, where opts->shots asked for them: the shots of the frames decoded in the window,
 * the last ending where its last frame does (none when nothing was decoded or none was asked).
 * Borrowed until vfi_decoder_free. VF_ERR_NOMEM. */
vf_status vfi_decoder_shots(vf_decoder *d, const vf_shot **shots, int *n, vf_err *err);
void vfi_decoder_free(vf_decoder **pd);

/* Frames own an AVFrame: create them once (pools), release the picture after use. */
vf_status vfi_frame_init(vf_frame *f);
void vfi_frame_release(vf_frame *f); /* drop the picture, keep the frame usable */
void vfi_frame_destroy(vf_frame *f);
/* Is f's picture in a hardware device's memory (kept there by keep_on_device)? */
int vfi_frame_on_device(const vf_frame *f);
/* Replace f's device picture by its copy in system memory, properties kept. VF_ERR_DECODE when
 * the copy fails, VF_ERR_NOMEM. A frame already in system memory is left as it is. */
vf_status vfi_frame_download(vf_frame *f, vf_err *err);

#endif /* VIDFEAT_DECODE_H */
