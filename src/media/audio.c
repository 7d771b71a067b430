/*
 * audio.c - a file's soundtrack as mono float samples at a model's rate (audio.h): libavformat
 * and libavcodec read and decode its best audio stream, libswresample averages the channels
 * (a matrix of 1 / channels) and resamples, in one context made from the first decoded frame's
 * format and made again if the stream changes it.
 *
 * Time is kept to the stream's timestamps on the input side: each frame's presentation time,
 * in input samples since the first frame's, is compared with the samples fed so far. Ahead by
 * more than GAP_S: silence is fed for the difference (at most a second per call, so a long gap
 * costs no memory; MAX_FILL_S more than the sound decoded in all, so that gaps cannot cost
 * unbounded time); behind by more than GAP_S: the frame is dropped. A jump of more than
 * MAX_GAP_S is taken for a broken timestamp, not a gap: counted from there on.
 */
#include "media/audio.h"

#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>

#include "core/mem.h"
#include "media/confine.h"
#include "media/decode.h"
#include "media/ffmpeg.h"
#include "media/probe.h"

#define GAP_S     0.02   /* timestamps this far from the samples are a gap (or an overlap) */
#define MAX_GAP_S 3600.0 /* a jump larger than this is a broken timestamp */
/* Silence filled into gaps, in all, at most this many seconds more than the sound decoded: a
 * file whose timestamps keep jumping ahead would otherwise cost hours of work per frame. */
#define MAX_FILL_S   600.0
#define MAX_CHANNELS 64
#define MAX_IN_RATE  768000
/* Below this a stream's rate is no sound a model hears: refused, not resampled into hours (a
 * 64 KB file at 1 Hz is 9 hours of samples). Telephony's 8000 Hz is far above it. */
#define MIN_IN_RATE 1000
/* Output samples one call of the resampler makes at most; what the input holds beyond that
 * waits in the resampler (input samples, the decoded frame's size), drained as it is read. So
 * that memory is this, not a frame's samples times the rate ratio, whatever the frame. */
#define CHUNK 65536

struct vf_audio {
    vf_audio_opts o;
    vf_audio_meta meta;
    AVFormatContext *fmt;
    vf_confine *conf;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    SwrContext *swr;
    AVRational tb;
    int64_t origin;    /* the file's start in the stream's time base */
    int64_t first_pts; /* the first frame's, AV_NOPTS_VALUE before it */
    int64_t fed;       /* input samples fed to swr (frames and silence) since the first frame */
    int64_t silence;   /* input samples of silence still to feed */
    int64_t filled;    /* input samples of silence fed or due, in all */
    int in_rate, in_format, in_channels;
    float *out; /* converted samples not handed out yet: out[pos .. len) */
    int len, pos, cap;
    int pending; /* the last conversion filled its CHUNK: the resampler may hold more */
    int demux_done, decoder_done, flushed;
    int64_t errors;
    vf_watchdog watch; /* cancel, and the deadline by which data must come */
};

void vfi_audio_free(vf_audio **pa)
{
    vf_audio *a = pa ? *pa : NULL;
    if (!a)
        return;
    swr_free(&a->swr);
    avcodec_free_context(&a->dec);
    avformat_close_input(&a->fmt);
    if (a->conf)
        vfi_confine_clear(a->conf);
    vfi_free(a->conf);
    av_packet_free(&a->pkt);
    av_frame_free(&a->frame);
    vfi_free(a->out);
    vfi_free(a);
    *pa = NULL;
}

const vf_audio_meta *vfi_audio_meta(const vf_audio *a)
{
    return &a->meta;
}

int64_t vfi_audio_errors(const vf_audio *a)
{
    return a->errors;
}

/* The resampler for frames like f: every channel weighted 1 / channels into one, to the rate
 * wanted, float. */
static vf_status make_swr(vf_audio *a, const AVFrame *f, vf_err *err)
{
    int n = f->ch_layout.nb_channels;
    if (n < 1 || n > MAX_CHANNELS || f->sample_rate < MIN_IN_RATE || f->sample_rate > MAX_IN_RATE)
        return vfi_fail(err, VF_ERR_DECODE,
                        "an audio stream of %d channel%s at %d Hz: not read (sound is 1 to %d "
                        "channels at %d to %d Hz)",
                        n, n == 1 ? "" : "s", f->sample_rate, MAX_CHANNELS, MIN_IN_RATE,
                        MAX_IN_RATE);
    /* zeroed: av_channel_layout_copy releases what its destination held first */
    AVChannelLayout in = {0}, mono = AV_CHANNEL_LAYOUT_MONO;
    if (f->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC)
        av_channel_layout_default(&in, n);
    else if (av_channel_layout_copy(&in, &f->ch_layout) < 0)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    swr_free(&a->swr);
    int ret = swr_alloc_set_opts2(&a->swr, &mono, AV_SAMPLE_FMT_FLT, a->o.sample_rate, &in,
                                  (enum AVSampleFormat)f->format, f->sample_rate, 0, NULL);
    av_channel_layout_uninit(&in);
    double matrix[MAX_CHANNELS];
    for (int c = 0; c < n; c++)
        matrix[c] = 1.0 / n;
    char eb[128];
    if (ret >= 0)
        ret = swr_set_matrix(a->swr, matrix, n);
    if (ret >= 0)
        ret = swr_init(a->swr);
    if (ret < 0)
        return vfi_fail(err, VF_ERR_DECODE, "cannot resample its audio: %s",
                        vfi_ff_err(ret, eb, sizeof(eb)));
    a->in_rate = f->sample_rate;
    a->in_format = f->format;
    a->in_channels = n;
    a->meta.in_rate = f->sample_rate;
    a->meta.channels = n;
    return VF_OK;
}

/* Room in out for n more samples (what is handed out already moved away). */
static vf_status room(vf_audio *a, int n, vf_err *err)
{
    if (a->pos > 0) {
        memmove(a->out, a->out + a->pos, sizeof(float) * (size_t)(a->len - a->pos));
        a->len -= a->pos;
        a->pos = 0;
    }
    float *p = vfi_grow(a->out, &a->cap, a->len + n, sizeof(float));
    if (!p)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    a->out = p;
    return VF_OK;
}

/* n input samples through swr into out, at most CHUNK of output a call (a->pending says the
 * resampler may hold more): in, the frame's planes; NULL with n > 0, n samples of silence; NULL
 * with n 0, the flush at the end (what the resampler still holds); `drain` (in and n ignored),
 * more of what it holds. */
static vf_status convert(vf_audio *a, const uint8_t **in, int n, int drain, vf_err *err)
{
    const uint8_t *none[MAX_CHANNELS] = {NULL};
    if (drain) {
        in = none; /* no input, not the flush: what is ready */
        n = 0;
    } else if (!in && n > 0) {
        if (swr_inject_silence(a->swr, n) < 0)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        in = none; /* then what is ready: swr_convert without input flushes */
        n = 0;
    }
    vf_status rc = room(a, CHUNK, err);
    if (rc < 0)
        return rc;
    uint8_t *dst = (uint8_t *)(a->out + a->len);
    int got = swr_convert(a->swr, &dst, CHUNK, in, in ? n : 0);
    if (got < 0) {
        char eb[128];
        return vfi_fail(err, VF_ERR_DECODE, "cannot resample its audio: %s",
                        vfi_ff_err(got, eb, sizeof(eb)));
    }
    a->len += got;
    a->pending = got == CHUNK;
    return VF_OK;
}

/* What the resampler holds, all of it into out (before its input changes: a new resampler, a
 * gap's silence). */
static vf_status drain_all(vf_audio *a, vf_err *err)
{
    vf_status rc = VF_OK;
    while (a->pending && rc >= 0)
        rc = convert(a, NULL, 0, 1, err);
    return rc;
}

/* The decoded frame a->frame into out, kept to its timestamp (above). */
static vf_status take_frame(vf_audio *a, vf_err *err)
{
    AVFrame *f = a->frame;
    vf_status rc = VF_OK;
    if (!a->swr || f->sample_rate != a->in_rate || f->format != a->in_format ||
        f->ch_layout.nb_channels != a->in_channels) {
        if (a->swr && ((rc = drain_all(a, err)) < 0 || (rc = convert(a, NULL, 0, 0, err)) < 0 ||
                       (rc = drain_all(a, err)) < 0)) /* the old one's tail */
            return rc;
        if ((rc = make_swr(a, f, err)) < 0)
            return rc;
    }
    int64_t pts = f->best_effort_timestamp;
    if (a->first_pts == AV_NOPTS_VALUE) {
        a->first_pts = pts != AV_NOPTS_VALUE ? pts : a->origin;
        a->meta.start = (double)(a->first_pts - a->origin) * av_q2d(a->tb);
    }
    if (pts != AV_NOPTS_VALUE) {
        double at = (double)(pts - a->first_pts) * av_q2d(a->tb) * a->in_rate; /* in samples */
        double ahead = at - (double)a->fed, gap = GAP_S * a->in_rate;
        if (ahead > MAX_GAP_S * a->in_rate || -ahead > MAX_GAP_S * a->in_rate) {
            /* a broken timestamp: go on from here */
            a->first_pts = pts - av_rescale_q(a->fed, (AVRational){1, a->in_rate}, a->tb);
        } else if (ahead > gap) {
            int64_t n = (int64_t)(ahead + 0.5);
            if ((double)(a->filled + n) > MAX_FILL_S * a->in_rate + (double)(a->fed - a->filled))
                return vfi_fail(err, VF_ERR_DECODE,
                                "its audio timestamps jump ahead by more than it holds sound "
                                "(%.0f s of gaps): not read",
                                (double)(a->filled + n) / a->in_rate);
            a->silence += n;
            a->filled += n;
        } else if (ahead + f->nb_samples < -gap) {
            return VF_OK; /* all of it is before what was fed already */
        }
    }
    while (a->silence > 0 && rc >= 0) { /* the gap first */
        int n = a->silence > a->in_rate ? a->in_rate : (int)a->silence;
        if ((rc = drain_all(a, err)) >= 0)
            rc = convert(a, NULL, n, 0, err);
        a->silence -= n;
        a->fed += n;
    }
    if (rc >= 0 && (rc = drain_all(a, err)) >= 0)
        rc = convert(a, (const uint8_t **)f->extended_data, f->nb_samples, 0, err);
    a->fed += f->nb_samples;
    return rc;
}

/* Decode until out holds something, or the end. VF_OK, VF_EOF, or a failure. */
static vf_status fill(vf_audio *a, vf_err *err)
{
    char eb[128];
    while (a->pos == a->len) {
        if (a->pending) { /* more of what the resampler holds (of the flush too, at the end) */
            vf_status rc = a->flushed ? convert(a, NULL, 0, 0, err) : convert(a, NULL, 0, 1, err);
            if (rc < 0)
                return rc;
            continue;
        }
        if (a->decoder_done) {
            if (a->flushed || !a->swr)
                return VF_EOF;
            a->flushed = 1;
            vf_status rc = convert(a, NULL, 0, 0, err); /* the resampler's last samples */
            if (rc < 0)
                return rc;
            continue;
        }
        int ret = avcodec_receive_frame(a->dec, a->frame);
        if (ret >= 0) {
            vf_status rc = take_frame(a, err);
            av_frame_unref(a->frame);
            if (rc < 0)
                return rc;
            continue;
        }
        if (ret == AVERROR_EOF) {
            a->decoder_done = 1;
            continue;
        }
        if (ret != AVERROR(EAGAIN)) { /* a frame that failed to decode */
            a->errors++;
            continue;
        }
        if (a->demux_done)
            return vfi_fail(err, VF_ERR_DECODE, "the audio decoder did not finish");
        vfi_watchdog_rearm(&a->watch);
        ret = av_read_frame(a->fmt, a->pkt);
        if (ret == AVERROR_EOF) {
            a->demux_done = 1;
            avcodec_send_packet(a->dec, NULL);
            continue;
        }
        if (ret < 0) {
            if (a->watch.stalled)
                return vfi_fail(err, VF_ERR_DECODE, "stalled: nothing could be read for %g s",
                                a->watch.timeout);
            if (a->o.cancel && atomic_load(a->o.cancel))
                return vfi_fail(err, VF_ERR_CANCELLED, "cancelled");
            return vfi_fail(err, VF_ERR_DECODE, "reading its audio: %s",
                            vfi_ff_err(ret, eb, sizeof(eb)));
        }
        if (a->pkt->stream_index == a->meta.stream_index && avcodec_send_packet(a->dec, a->pkt) < 0)
            a->errors++; /* a corrupt packet: skipped */
        av_packet_unref(a->pkt);
    }
    return VF_OK;
}

vf_status vfi_audio_read(vf_audio *a, float *buf, int max, int *got, vf_err *err)
{
    *got = 0;
    while (*got < max) {
        vf_status rc = fill(a, err);
        if (rc == VF_EOF)
            return *got ? VF_OK : VF_EOF;
        if (rc < 0)
            return rc;
        int n = a->len - a->pos < max - *got ? a->len - a->pos : max - *got;
        memcpy(buf + *got, a->out + a->pos, sizeof(float) * (size_t)n);
        a->pos += n;
        *got += n;
    }
    return VF_OK;
}

/* The best audio stream of the opened file, its decoder ready. */
static vf_status open_stream(vf_audio *a, vf_err *err)
{
    const AVCodec *codec = NULL;
    int si = av_find_best_stream(a->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (si == AVERROR_STREAM_NOT_FOUND)
        return vfi_fail(err, VF_ERR_DECODE, "no audio stream (%u stream%s, none of them audio)",
                        a->fmt->nb_streams, a->fmt->nb_streams == 1 ? "" : "s");
    if (si < 0 || !codec) {
        const AVCodecParameters *par = a->fmt->streams[si >= 0 ? si : 0]->codecpar;
        return vfi_fail(err, VF_ERR_UNSUPPORTED,
                        "unsupported audio codec: this FFmpeg has no decoder for %s",
                        avcodec_get_name(par->codec_id));
    }
    AVStream *st = a->fmt->streams[si];
    for (unsigned i = 0; i < a->fmt->nb_streams; i++)
        a->fmt->streams[i]->discard = (int)i == si ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
    const AVCodecParameters *par = st->codecpar;
    if (par->ch_layout.nb_channels > MAX_CHANNELS || par->sample_rate > MAX_IN_RATE ||
        par->sample_rate < 0 || (par->sample_rate > 0 && par->sample_rate < MIN_IN_RATE))
        return vfi_fail(err, VF_ERR_DECODE,
                        "an audio stream of %d channel%s at %d Hz: not read (sound is 1 to %d "
                        "channels at %d to %d Hz)",
                        par->ch_layout.nb_channels, par->ch_layout.nb_channels == 1 ? "" : "s",
                        par->sample_rate, MAX_CHANNELS, MIN_IN_RATE, MAX_IN_RATE);
    char eb[128];
    int ret;
    if (!(a->dec = avcodec_alloc_context3(codec)))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if ((ret = avcodec_parameters_to_context(a->dec, par)) < 0 ||
        (a->dec->pkt_timebase = st->time_base, a->dec->thread_count = 1,
         (ret = avcodec_open2(a->dec, codec, NULL)) < 0))
        return vfi_fail(err, VF_ERR_DECODE, "cannot open the %s audio decoder: %s", codec->name,
                        vfi_ff_err(ret, eb, sizeof(eb)));
    a->meta.stream_index = si;
    snprintf(a->meta.codec, sizeof(a->meta.codec), "%s", codec->name);
    a->tb = st->time_base;
    if (a->fmt->start_time != AV_NOPTS_VALUE)
        a->origin = av_rescale_q(a->fmt->start_time, AV_TIME_BASE_Q, a->tb);
    else if (st->start_time != AV_NOPTS_VALUE)
        a->origin = st->start_time;
    a->meta.origin = (double)a->origin * av_q2d(a->tb);
    a->meta.duration = st->duration != AV_NOPTS_VALUE ? st->duration * av_q2d(a->tb) : 0.0;
    return VF_OK;
}

vf_status vfi_audio_open(const char *path, const vf_audio_opts *opts, vf_audio **out, vf_err *err)
{
    *out = NULL;
    if (!opts || opts->sample_rate < 1000 || opts->sample_rate > 384000)
        return vfi_fail(err, VF_ERR_INVALID, "a sample rate of 1 to 384 kHz is needed");
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return vfi_fail(err, VF_ERR_UNSUPPORTED,
                        "not a regular file: its sound cannot be read a second time beside its "
                        "pictures");
    vf_audio *a = vfi_calloc(1, sizeof(*a));
    if (!a)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    a->o = *opts;
    a->first_pts = AV_NOPTS_VALUE;
    vf_status rc = VF_OK;
    a->fmt = avformat_alloc_context();
    a->conf = vfi_calloc(1, sizeof(*a->conf));
    a->pkt = av_packet_alloc();
    a->frame = av_frame_alloc();
    if (!a->fmt || !a->conf || !a->pkt || !a->frame) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    a->watch = (vf_watchdog){.cancel = a->o.cancel, .timeout = a->o.stall_timeout};
    a->fmt->interrupt_callback.callback = vfi_watchdog_interrupt;
    a->fmt->interrupt_callback.opaque = &a->watch;
    vfi_watchdog_rearm(&a->watch);
    if ((rc = vfi_probe_open(&a->fmt, path, a->o.archive,
                             a->o.max_streams > 0 ? a->o.max_streams : VF_DEFAULT_MAX_STREAMS,
                             VF_DEFAULT_MAX_PIXELS, &a->watch, a->conf, err)) < 0)
        goto fail;
    if ((rc = open_stream(a, err)) < 0)
        goto fail;
    /* the first samples, so that meta.start is known (and a stream that gives none fails now) */
    rc = fill(a, err);
    if (rc == VF_EOF)
        rc = vfi_fail(err, VF_ERR_DECODE, "its audio stream holds no sound that decodes");
    if (rc < 0)
        goto fail;
    *out = a;
    return VF_OK;
fail:
    vfi_audio_free(&a);
    return rc;
}
