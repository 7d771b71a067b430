/*
 * probe.c - what a file is before it is decoded: media or not (vfi_decode_probe, for a
 * directory walk), text art FFmpeg would read as video, and the pixel limit checked before a
 * file's streams are probed and given to the probing decoders.
 */
#include "media/probe.h"

#include <libavformat/avformat.h>
#include <libavutil/avstring.h>

#include "media/confine.h"
#include "media/ffmpeg.h"

/* FFmpeg's readers of text art (ANSI, BinText, XBin, iCE Draw) open many plain text files,
 * .nfo and .txt among them, as 640x400 "video": those are not videos or images to vidfeat. */
int vfi_probe_text_art(const AVCodecParameters *par)
{
    switch (par->codec_id) {
    case AV_CODEC_ID_ANSI:
    case AV_CODEC_ID_BINTEXT:
    case AV_CODEC_ID_XBIN:
    case AV_CODEC_ID_IDF:
        return 1;
    default:
        return 0;
    }
}

vf_status vfi_probe_pixels_refused(const AVCodecParameters *par, int64_t max_pixels, vf_err *err)
{
    return vfi_fail(err, VF_ERR_DECODE,
                    "frames of %dx%d (%lld pixels), more than the %lld allowed (--max-pixels): not "
                    "decoded",
                    par->width, par->height, (long long)par->width * par->height,
                    (long long)max_pixels);
}

/* Before probing: a file whose every video stream declares frames over the limit (so probing,
 * which decodes a frame of each, is not run on them). */
vf_status vfi_probe_check_pixels(const AVFormatContext *fmt, int64_t max_pixels, vf_err *err)
{
    const AVCodecParameters *big = NULL;
    for (unsigned i = 0; i < fmt->nb_streams; i++) {
        const AVCodecParameters *par = fmt->streams[i]->codecpar;
        if (par->codec_type != AVMEDIA_TYPE_VIDEO)
            continue;
        if ((int64_t)par->width * par->height <= max_pixels)
            return VF_OK;
        big = par;
    }
    return big ? vfi_probe_pixels_refused(big, max_pixels, err) : VF_OK;
}

/* avformat_find_stream_info with each probing decoder told the pixel limit (FFmpeg's
 * max_pixels: a larger frame is refused before its picture is allocated). */
int vfi_probe_streams(AVFormatContext *fmt, int64_t max_pixels)
{
    unsigned n = fmt->nb_streams;
    AVDictionary **opts = n ? av_calloc(n, sizeof(*opts)) : NULL;
    if (n && !opts)
        return AVERROR(ENOMEM);
    int ret = 0;
    for (unsigned i = 0; i < n && ret >= 0; i++)
        ret = av_dict_set_int(&opts[i], "max_pixels", max_pixels, 0);
    if (ret >= 0)
        ret = avformat_find_stream_info(fmt, opts);
    for (unsigned i = 0; i < n; i++)
        av_dict_free(&opts[i]);
    av_free(opts);
    return ret;
}

vf_status vfi_probe_open(AVFormatContext **fmt, const char *path, const vf_archive *archive,
                         int max_streams, int64_t max_pixels, const vf_watchdog *watch,
                         vf_confine *conf, vf_err *err)
{
    char eb[128];
    vfi_ff_log_init(); /* FFmpeg's lines into vidfeat's log, whichever opener comes first */
    vfi_ff_error_clear();
    int ret = vfi_confine_open(fmt, path, archive, conf, err);
    vf_status rc = vfi_confine_check(conf, err);
    if (rc < 0)
        return rc;
    if (ret < 0 && watch->stalled)
        return vfi_fail(err, VF_ERR_DECODE, "stalled: nothing could be read for %g s",
                        watch->timeout);
    if (ret < 0)
        return vfi_fail(
            err, ret == AVERROR(ENOENT) || ret == AVERROR(EACCES) ? VF_ERR_IO : VF_ERR_DECODE, "%s",
            ret == AVERROR_INVALIDDATA ? "not a media file FFmpeg can read"
            : vfi_ff_first_error()[0]  ? vfi_ff_first_error()
                                       : vfi_ff_err(ret, eb, sizeof(eb)));
    if ((*fmt)->nb_streams > (unsigned)max_streams)
        return vfi_fail(err, VF_ERR_DECODE,
                        "%u streams, more than the %d allowed (--max-streams): not probed",
                        (*fmt)->nb_streams, max_streams);
    if ((rc = vfi_probe_check_pixels(*fmt, max_pixels, err)) < 0) /* as declared */
        return rc;
    ret = vfi_probe_streams(*fmt, max_pixels);
    if ((rc = vfi_confine_check(conf, err)) < 0)
        return rc;
    if (ret < 0)
        return vfi_fail(err, VF_ERR_DECODE, "cannot read stream info: %s",
                        vfi_ff_first_error()[0] ? vfi_ff_first_error()
                                                : vfi_ff_err(ret, eb, sizeof(eb)));
    return VF_OK;
}

/* Is the file at path, which FFmpeg could not open, media all the same: named like a media
 * file, or recognised by its content (a copy cut short before its index, say)? */
static int looks_like_media(const char *path)
{
    static const char *const exts = "mp4,m4v,mov,qt,mkv,mk3d,webm,avi,wmv,asf,flv,f4v,ts,mts,"
                                    "m2ts,m2t,mpg,mpeg,m2v,vob,3gp,3g2,ogv,ogg,mxf,dv,y4m,ivf,"
                                    "h264,264,h265,265,hevc,wav,mp3,m4a,aac,flac,opus,oga";
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash) && av_match_name(dot + 1, exts))
        return 1;
    int score;
    const AVInputFormat *f = vfi_probe_head(path, &score);
    return f && score >= AVPROBE_SCORE_MAX / 2 && !av_match_name("tty", f->name);
}

int vfi_decode_probe(const char *path, const vf_archive *archive)
{
    vfi_ff_log_init();
    AVFormatContext *fmt = NULL;
    vf_confine c;
    vf_err err;
    int verdict = VF_PROBE_NOT_MEDIA;
    int ret = vfi_confine_open(&fmt, path, archive, &c, &err);
    if (c.refused[0]) {
        verdict = VF_PROBE_BROKEN; /* refers outside: refused, with its line, by the run */
    } else if (ret < 0) {
        verdict = looks_like_media(path) ? VF_PROBE_BROKEN : VF_PROBE_NOT_MEDIA;
    } else if (avformat_find_stream_info(fmt, NULL) < 0 || c.refused[0]) {
        verdict = VF_PROBE_BROKEN;
    } else {
        int si = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        int audio = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0) >= 0;
        if (si >= 0 && vfi_probe_text_art(fmt->streams[si]->codecpar))
            verdict = VF_PROBE_NOT_MEDIA;
        else if (si >= 0)
            verdict = VF_PROBE_VIDEO;
        else /* sound only is media without a picture; subtitles or data alone are not */
            verdict = audio ? VF_PROBE_BROKEN : VF_PROBE_NOT_MEDIA;
    }
    avformat_close_input(&fmt);
    vfi_confine_clear(&c);
    return verdict;
}
