/*
 * probe.h - what a file is before it is decoded (probe.c).
 */
#ifndef VIDFEAT_PROBE_H
#define VIDFEAT_PROBE_H

#include <stdint.h>

#include "core/path.h"
#include "core/status.h"

/* What path is, by its content (and, where FFmpeg cannot open it, its name), opened as
 * vfi_decoder_open would (archive NULL: the same default): */
enum {
    VF_PROBE_NOT_MEDIA = 0, /* not media: text, documents, subtitles alone, ... */
    VF_PROBE_VIDEO = 1,     /* media with a video stream FFmpeg reads */
    VF_PROBE_BROKEN = 2     /* media that will not give frames: cut short, corrupt, sound only,
                             * or referring to files outside the archive */
};
int vfi_decode_probe(const char *path, const vf_archive *archive);

/* For the decoder (decode.c): */
struct AVCodecParameters;
struct AVFormatContext;
/* Is the stream text art (ANSI, BinText, XBin, iCE Draw) FFmpeg reads as 640x400 video? */
int vfi_probe_text_art(const struct AVCodecParameters *par);
/* The refusal of a stream whose frames have more than max_pixels pixels (VF_ERR_DECODE). */
vf_status vfi_probe_pixels_refused(const struct AVCodecParameters *par, int64_t max_pixels,
                                   vf_err *err);
/* Before probing: refused when every video stream declares frames over the limit. */
vf_status vfi_probe_check_pixels(const struct AVFormatContext *fmt, int64_t max_pixels,
                                 vf_err *err);
/* avformat_find_stream_info with each probing decoder told the pixel limit (an AVERROR). */
int vfi_probe_streams(struct AVFormatContext *fmt, int64_t max_pixels);

/* Open path into *fmt (allocated by the caller, its interrupt callback watch's) and read its
 * streams' parameters, with the checks and messages every input gets before a stream is
 * chosen: what it refers to outside the archive (vfi_confine_open, conf), not media, more
 * streams than max_streams, every video stream over max_pixels (as declared, then while
 * probing), a source stopped by watch's deadline. */
struct vf_confine;
struct vf_watchdog;
vf_status vfi_probe_open(struct AVFormatContext **fmt, const char *path, const vf_archive *archive,
                         int max_streams, int64_t max_pixels, const struct vf_watchdog *watch,
                         struct vf_confine *conf, vf_err *err);

#endif /* VIDFEAT_PROBE_H */
