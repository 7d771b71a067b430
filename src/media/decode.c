/*
 * decode.c - libavformat/libavcodec: open a file, pick its best video stream, run the
 * send/receive loop on the codec's own threads, and sample as early as possible. Called on the
 * pipeline's decode thread; owns the AVFormatContext, AVCodecContext and packet.
 *
 * Sampling skips work, not only frames: --keyframes never sends non-key packets to the decoder
 * (and decodes each on its own); the decoder may drop frames no other refers to that are shown
 * before the next wanted time (set_skip); --start, and a wanted time more than SKIP_MIN_GAP
 * seconds away, skip ahead to the key frame before it (skip_ahead): by a seek where the
 * stream's index lists every packet (MP4), else by reading packets without decoding them up to
 * the key frame its index names, else by holding the latest group of pictures read until that
 * time (hold_packet). Every packet skipped is still counted, so each frame's number stays
 * exact. Shots (opts.shots) need every frame of the window: then only --start skips ahead, and
 * each frame decoded goes to the shot detector (shot_reader.h) before sampling keeps or drops it.
 *
 * Time: each frame's best-effort timestamp in the stream's time base (pts, stored raw) and t =
 * pts x time base - the file's start time, which is the position `ffmpeg -ss t` seeks to.
 * Frame index: the frame's number in presentation order, ffprobe's, counted from the packets
 * read (framenum.h) whatever the decoder skipped. Formats without timestamps (raw elementary
 * streams) are decoded whole instead, and frames numbered as they come.
 */
#include "media/decode.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/display.h>
#include <libavutil/hwcontext.h>
#include <libavutil/parseutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "core/log.h"
#include "core/mem.h"
#include "media/confine.h"
#include "media/ffmpeg.h"
#include "media/probe.h"
#include "media/framenum.h"
#include "media/shot_reader.h"

#define SKIP_MIN_GAP 4.0 /* seconds: below this, decoding through is cheaper than skipping */
#define T_EPS        1e-6
/* Packets read past the decoder at most to number a frame: a reordering window, or an open
 * GOP's leading frames, is far smaller */
#define READ_AHEAD_MAX 64
/* A group of pictures held while skipping without an index (hold_packet), at most: past this
 * it is decoded instead (a key frame this rare is decoded through) */
#define HOLD_MAX_PACKETS 4096
#define HOLD_MAX_BYTES   (256 << 20)

struct vf_decoder {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *tmp;
    AVFrame *sw;               /* a kept frame copied back from the device */
    enum AVPixelFormat hw_fmt; /* the device's frame format; NONE: decoding on the CPU */
    int hw_refused;            /* the device declined this stream (said once) */
    AVRational tb;
    int64_t origin; /* start time in the stream's time base */
    vf_sampling s;
    vf_video_meta meta;
    int64_t decoded;            /* frames out of the decoder */
    int64_t errors;             /* packets (or frames) the decoder rejected */
    int64_t errors_before_last; /* of those, the ones followed by a decoded frame */
    char note[160];             /* about a file that ends well but not whole (vfi_decoder_note) */
    char first_error[64];       /* the decoder's first complaint */
    int64_t kept;
    int64_t window_first; /* ordinal of the first frame inside the window (for --every) */
    int64_t last_pts;
    double next_t; /* --fps: the next wanted time */
    /* Frame numbers (framenum.h): the packets of the stream read so far, and whether the
     * format's timestamps let them number frames; without, nothing is skipped (ordinals). */
    vf_framenum ledger;
    int numbered;
    int64_t last_pos;   /* byte position of the last packet read; -1 unknown */
    int64_t frontier;   /* the latest decoding time read (presentation time where none) */
    int64_t key_delay;  /* the most a key frame's presentation time has followed its decoding */
    int64_t last_key;   /* the ledger's latest time: an untimed packet is shown after it */
    int64_t skip_hi;    /* the latest time of a packet not decoded whole (skipped, or sent to be
                         * dropped if unreferenced); INT64_MIN: none */
    int64_t prev_shown; /* the time of the last frame out of the decoder; INT64_MIN: none */
    int64_t next_index; /* the number after the last frame's */
    /* Packets read ahead of the decoder to number a frame (read_ahead), oldest first, and
     * what reading returned after them (0, or AVERROR_EOF or an error to act on later). */
    vf_pktq ahead;
    int ahead_end;
    int start_pending; /* --start: skip_ahead once the first packet is read */
    int key_drain;     /* --keyframes: the key frame sent is being drained on its own */
    /* skip_ahead: packets are read, not decoded, until the key frame at skip_pos (SKIP_TO_KEY;
     * where positions are unknown, one with a timestamp at or after skip_ts), or, without an
     * index, until one decoded at or after skip_ts, the last group of pictures held (held) and
     * then decoded (SKIP_HOLDING) */
    enum { SKIP_NONE, SKIP_TO_KEY, SKIP_HOLDING } skipping;
    int64_t skip_pos, skip_ts;
    int64_t held_to; /* the last SKIP_HOLDING's skip_ts: never held again up to there */
    vf_pktq held;
    /* seek_exact: the index entry a seek lands on (-1 none pending), and the entries up to
     * seen_entry whose packets are shown (not marked for discarding) */
    int seek_entry;
    int sought; /* the last entry seek_exact went to: never again (mov may land earlier) */
    int seen_entry;
    int64_t seen_shown;
    int flushing; /* the demuxer is exhausted; the decoder is being drained */
    int done;
    int read_error; /* AVERROR from av_read_frame other than EOF */
    int pending;    /* d->pkt holds a packet the decoder refused with EAGAIN */
    vf_decode_opts o;
    vf_watchdog watch; /* cancel, and the deadline by which a frame must come */
    /* A FIFO, socket or device is read through our own non-blocking I/O, so that a source with
     * no data at all can still be abandoned (watchdog) or cancelled: FFmpeg's file protocol
     * would sit in read(2). -1 for regular files. */
    int fd;
    int got_bytes;
    AVIOContext *pb;
    vf_confine *conf;      /* what the input may read (vfi_confine_open); freed after fmt */
    vf_shot_reader *shots; /* opts.shots: every frame of the window measured */
    double shots_end;      /* the end of the last frame measured, in seconds */
};

/* Timestamps are whatever a file claims, any int64: arithmetic on them saturates rather than
 * overflow, and a time in seconds is computed in double. */
static int64_t ts_add(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

/* Seconds from the stream's start to ts (in the stream's time base). */
static double ts_seconds(const vf_decoder *d, int64_t ts)
{
    return ((double)ts - (double)d->origin) * av_q2d(d->tb);
}

#define PIPE_IO_BUFFER 65536
#define PIPE_POLL_MS   100

vf_status vfi_frame_init(vf_frame *f)
{
    memset(f, 0, sizeof(*f));
    f->av = av_frame_alloc();
    return f->av ? VF_OK : VF_ERR_NOMEM;
}

void vfi_frame_release(vf_frame *f)
{
    if (f && f->av)
        av_frame_unref(f->av);
}

void vfi_frame_destroy(vf_frame *f)
{
    if (!f)
        return;
    AVFrame *av = f->av;
    av_frame_free(&av);
    f->av = NULL;
}

void vfi_decoder_free(vf_decoder **pd)
{
    vf_decoder *d = pd ? *pd : NULL;
    if (!d)
        return;
    avcodec_free_context(&d->dec);
    avformat_close_input(&d->fmt);
    if (d->conf)
        vfi_confine_clear(d->conf);
    vfi_free(d->conf);
    if (d->pb) { /* ours, not FFmpeg's: AVFMT_FLAG_CUSTOM_IO */
        av_freep(&d->pb->buffer);
        avio_context_free(&d->pb);
    }
    if (d->fd >= 0)
        close(d->fd);
    av_packet_free(&d->pkt);
    av_frame_free(&d->tmp);
    av_frame_free(&d->sw);
    vfi_shot_reader_free(&d->shots);
    vfi_framenum_clear(&d->ledger);
    vfi_pktq_free(&d->ahead);
    vfi_pktq_free(&d->held);
    vfi_free(d);
    *pd = NULL;
}

/* get_format: the device's format when the decoder offers it (it does not for a profile, bit
 * depth or size the device cannot decode), else the first software one: the CPU decodes. */
static enum AVPixelFormat pick_format(AVCodecContext *c, const enum AVPixelFormat *fmts)
{
    vf_decoder *d = c->opaque;
    for (const enum AVPixelFormat *p = fmts; *p != AV_PIX_FMT_NONE; p++)
        if (*p == d->hw_fmt)
            return *p;
    for (const enum AVPixelFormat *p = fmts; *p != AV_PIX_FMT_NONE; p++) {
        const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(*p);
        if (desc && !(desc->flags & AV_PIX_FMT_FLAG_HWACCEL)) {
            if (!d->hw_refused)
                vfi_log(VF_LOG_INFO, "decode",
                        "%s: the %s device cannot decode this %s stream (%s): decoding on the CPU",
                        d->fmt->url, vfi_hwdev_name(d->o.hw), d->meta.codec, desc->name);
            d->hw_refused = 1;
            return *p;
        }
    }
    return AV_PIX_FMT_NONE;
}

/* Replace the device frame in d->tmp by its copy in system memory. */
static vf_status download(vf_decoder *d, vf_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    int ret = vfi_hwdev_copy_back(d->tmp, d->sw);
    if (ret < 0)
        return vfi_fail(err, VF_ERR_DECODE, "copying a frame from the %s device: %s",
                        vfi_hwdev_name(d->o.hw), vfi_ff_err(ret, eb, sizeof(eb)));
    return VF_OK;
}

int vfi_frame_on_device(const vf_frame *f)
{
    return f->av && ((const AVFrame *)f->av)->hw_frames_ctx != NULL;
}

vf_status vfi_frame_download(vf_frame *f, vf_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    if (!vfi_frame_on_device(f))
        return VF_OK;
    AVFrame *scratch = av_frame_alloc();
    if (!scratch)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    int ret = vfi_hwdev_copy_back(f->av, scratch);
    av_frame_free(&scratch);
    if (ret < 0)
        return vfi_fail(err, VF_ERR_DECODE, "copying a frame from the device: %s",
                        vfi_ff_err(ret, eb, sizeof(eb)));
    return VF_OK;
}

const vf_video_meta *vfi_decoder_meta(const vf_decoder *d)
{
    return &d->meta;
}

void vfi_decoder_counts(const vf_decoder *d, int64_t *decoded, int64_t *errors)
{
    *decoded = d->decoded;
    *errors = d->errors;
}

const char *vfi_decoder_note(const vf_decoder *d)
{
    return d->note;
}

/* Clockwise rotation that makes the picture upright, from the display matrix. */
static int stream_rotation(const AVStream *st)
{
    const uint8_t *m = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
    if (!m)
        return 0;
    double theta = -av_display_rotation_get((const int32_t *)m);
    if (isnan(theta))
        return 0;
    int r = (int)lround(theta / 90.0) * 90 % 360;
    return r < 0 ? r + 360 : r;
}

/* AVIOContext read callback for non-regular files: wait for data in short polls, checking the
 * cancel flag and the watchdog between them. A FIFO whose writer has not opened it yet reads
 * as end of file: before the first byte that means "wait", after it the end. */
static int pipe_read(void *opaque, uint8_t *buf, int size)
{
    vf_decoder *d = opaque;
    for (;;) {
        if (vfi_watchdog_interrupt(&d->watch))
            return AVERROR_EXIT;
        ssize_t n = read(d->fd, buf, (size_t)size);
        if (n > 0) {
            d->got_bytes = 1;
            return (int)n;
        }
        if (n == 0 && d->got_bytes)
            return AVERROR_EOF;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return AVERROR(errno);
        if (n == 0) { /* no writer yet: poll() would report a hang-up at once */
            struct timespec ts = {0, PIPE_POLL_MS * 1000000L};
            nanosleep(&ts, NULL);
        } else {
            struct pollfd pfd = {d->fd, POLLIN, 0};
            poll(&pfd, 1, PIPE_POLL_MS);
        }
    }
}

/* For a path that is not a regular file, open it ourselves, non-blocking, and give the format
 * context an AVIOContext reading through pipe_read. Regular files keep FFmpeg's own I/O. */
static vf_status open_pipe_io(vf_decoder *d, const char *path, vf_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return VF_OK;
    /* inside the archive when there is one, no link followed (path.h): the name checked is
     * the one read */
    int opened = d->o.archive ? vfi_archive_open(d->o.archive, path, O_RDONLY | O_NONBLOCK, &d->fd)
                 : (d->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) >= 0 ? 1
                                                                                : -1;
    if (opened == 0 || (opened < 0 && errno == ELOOP))
        return vfi_fail(err, VF_ERR_DENIED, "%s",
                        opened == 0 ? "is outside the archive"
                                    : "changed while it was opened: a link in its name now leads "
                                      "out of the archive");
    if (opened < 0)
        return vfi_fail(err, errno == ENOENT || errno == EACCES ? VF_ERR_IO : VF_ERR_DECODE, "%s",
                        strerror(errno));
    uint8_t *buf = av_malloc(PIPE_IO_BUFFER);
    if (buf)
        d->pb = avio_alloc_context(buf, PIPE_IO_BUFFER, 0, d, pipe_read, NULL, NULL);
    if (!d->pb) {
        av_free(buf);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    d->fmt->pb = d->pb;
    return VF_OK;
}

/* Index entries in [a, b) whose packets are shown (not marked for discarding). */
static int64_t shown_between(const AVStream *st, int a, int b)
{
    int64_t n = 0;
    for (int k = a; k < b; k++)
        n += !(avformat_index_get_entry((AVStream *)st, k)->flags & AVINDEX_DISCARD_FRAME);
    return n;
}

/* Those before entry i, counted on from where the last call stopped (seeks only go forward). */
static int64_t shown_entries(vf_decoder *d, const AVStream *st, int i)
{
    if (d->seen_entry < i) {
        d->seen_shown += shown_between(st, d->seen_entry, i);
        d->seen_entry = i;
    }
    return d->seen_shown;
}

/*
 * Where the stream's index lists every packet in decoding order (MP4's sample tables), a real
 * seek to its entry i keeps frame numbers exact: the packets before it are counted from the
 * index (every packet decoded before a key frame is shown before it). 1 seeked, 0 not done.
 */
static int seek_exact(vf_decoder *d, AVStream *st, int i, const AVIndexEntry *e)
{
    if (!d->fmt->pb || !(d->fmt->pb->seekable & AVIO_SEEKABLE_NORMAL) || st->nb_frames <= 0 ||
        avformat_index_get_entries_count(st) != st->nb_frames || d->ahead_end < 0 || i <= d->sought)
        return 0;
    int64_t skipped = shown_entries(d, st, i) - d->ledger.packets;
    /* mov takes the time asked for a presentation time and moves it back by its first frame's
     * delay before searching its decoding times: aimed half way to the next key frame, the
     * seek lands on entry i whatever that delay (seek_landed corrects the count otherwise) */
    int64_t aim = e->timestamp;
    int n = avformat_index_get_entries_count(st);
    for (int k = i + 1; k < n && k <= i + HOLD_MAX_PACKETS; k++) {
        const AVIndexEntry *next = avformat_index_get_entry(st, k);
        if (next->flags & AVINDEX_KEYFRAME) {
            aim = ts_add(aim, next->timestamp / 2 - e->timestamp / 2);
            break;
        }
    }
    if (skipped < 0 || av_seek_frame(d->fmt, d->meta.stream_index, aim, AVSEEK_FLAG_BACKWARD) < 0)
        return 0; /* reading on is still exact */
    vfi_framenum_skip(&d->ledger, skipped);
    vfi_pktq_drop(&d->ahead); /* read before the seek, and before its target */
    d->seek_entry = i;
    d->sought = i;
    return 1;
}

/* The first packet after seek_exact: where the seek landed on another entry than asked, the
 * count moves by the entries between. */
static void seek_landed(vf_decoder *d, const AVPacket *pkt)
{
    AVStream *st = d->fmt->streams[d->meta.stream_index];
    int want = d->seek_entry;
    d->seek_entry = -1;
    const AVIndexEntry *e = avformat_index_get_entry(st, want);
    if (!e || e->pos == pkt->pos || pkt->dts == AV_NOPTS_VALUE)
        return;
    int got = av_index_search_timestamp(st, pkt->dts, AVSEEK_FLAG_ANY | AVSEEK_FLAG_BACKWARD);
    const AVIndexEntry *g = got >= 0 ? avformat_index_get_entry(st, got) : NULL;
    if (!g || g->pos != pkt->pos)
        return;
    /* landed earlier: the packets between are read (and counted) again */
    vfi_framenum_skip(&d->ledger,
                      got > want ? shown_between(st, want, got) : -shown_between(st, got, want));
}

/*
 * Skip to time t (seconds on the file's timeline) without decoding what lies before: where the
 * stream's index names a key frame decoded before t by at least the most a key frame's
 * presentation has followed its decoding (so shown at or before t, as is every frame decoded
 * before it) that has
 * not been read yet, the decoder is emptied (what it holds is before t) and the file seeked there
 * when its index lists every packet (seek_exact), else packets are read, counted and dropped until
 * that key frame. Else nothing changes and the frames on the way are decoded (set_skip lets the
 * decoder drop what it can). 1 when seeked.
 */
static int skip_ahead(vf_decoder *d, double t)
{
    if (!d->numbered)
        return 0;
    AVStream *st = d->fmt->streams[d->meta.stream_index];
    double ticks = t / av_q2d(d->tb);
    if (!(ticks < 0x1p62)) /* t is a time wanted in the file: beyond any, or NaN */
        return 0;
    int64_t ts = ts_add(ts_add(d->origin, llround(ticks)), -d->key_delay);
    int i = av_index_search_timestamp(st, ts, AVSEEK_FLAG_BACKWARD);
    const AVIndexEntry *e = i >= 0 ? avformat_index_get_entry(st, i) : NULL;
    int to_key = e && e->pos >= 0 && e->pos > d->last_pos;
    int known = e && i + 1 < avformat_index_get_entries_count(st); /* key frames past ts */
    if (!to_key && (known || ts <= d->frontier || ts <= d->held_to))
        return 0; /* the key frame is behind: decode on */
    avcodec_flush_buffers(d->dec);
    if (d->pending) {
        av_packet_unref(d->pkt);
        d->pending = 0;
    }
    d->last_pts = AV_NOPTS_VALUE; /* times start again from the key frame */
    d->skip_hi = INT64_MAX;       /* frames from here on are numbered by the ledger */
    if (!to_key) {
        d->skipping = SKIP_HOLDING;
        d->skip_ts = ts;
        d->held_to = ts;
        return 0;
    }
    if (seek_exact(d, st, i, e))
        return 1;
    d->skipping = SKIP_TO_KEY;
    d->skip_pos = e->pos;
    d->skip_ts = e->timestamp;
    return 0;
}

/* Skipping ends: the held packets go to the decoder first, then what was read ahead of them.
 * 0 or AVERROR(ENOMEM). */
static int release_held(vf_decoder *d)
{
    AVPacket *next;
    while ((next = vfi_pktq_pop(&d->ahead)))
        if (vfi_pktq_push(&d->held, next) < 0) {
            av_packet_free(&next);
            return AVERROR(ENOMEM);
        }
    vf_pktq q = d->ahead;
    d->ahead = d->held;
    d->held = q;
    d->skipping = SKIP_NONE;
    return 0;
}

/*
 * Skipping without an index (SKIP_HOLDING), the packet in d->pkt: the packets from the latest
 * key frame decoded at or before skip_ts on are held, the older ones dropped, until one decoded
 * after it; the held group of pictures then goes to the decoder first, from its key frame. So
 * does a group too long to hold. 0 or AVERROR(ENOMEM).
 */
static int hold_packet(vf_decoder *d)
{
    AVPacket *pkt = d->pkt;
    int64_t when = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
    int before = when == AV_NOPTS_VALUE || when <= d->skip_ts;
    int key = (pkt->flags & AV_PKT_FLAG_KEY) != 0;
    if (key && before)
        vfi_pktq_drop(&d->held); /* a later key frame before the time: decoding starts there */
    if (!d->held.n && !key && before) {
        av_packet_unref(pkt);
        return 0;
    }
    AVPacket *mine = av_packet_alloc();
    if (!mine)
        return AVERROR(ENOMEM);
    av_packet_move_ref(mine, pkt);
    if (vfi_pktq_push(&d->held, mine) < 0) {
        av_packet_free(&mine);
        return AVERROR(ENOMEM);
    }
    if (before && d->held.n < HOLD_MAX_PACKETS && d->held.bytes < HOLD_MAX_BYTES)
        return 0;
    return release_held(d);
}

/* While skipping: is this packet the key frame decoding starts again at? */
static int skip_ends(const vf_decoder *d, const AVPacket *pkt)
{
    if (!(pkt->flags & AV_PKT_FLAG_KEY))
        return 0;
    if (pkt->pos >= 0)
        return pkt->pos >= d->skip_pos;
    int64_t ts = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
    return ts != AV_NOPTS_VALUE && ts >= d->skip_ts;
}

/* A packet of the stream read: count it (a packet the demuxer marks for discarding, such as one
 * an edit list cuts, is decoded for its references but never shown). 0 or AVERROR(ENOMEM). */
static int count_packet(vf_decoder *d, const AVPacket *pkt)
{
    if (d->seek_entry >= 0)
        seek_landed(d, pkt);
    if (pkt->pos > d->last_pos) /* the furthest read: a seek that lands earlier (mov) is
                                 * not taken again to the same place */
        d->last_pos = pkt->pos;
    if (d->numbered && d->ledger.packets == 0 && pkt->pts == AV_NOPTS_VALUE) {
        /* packets without presentation times (AVI): nothing is skipped, frames are numbered
         * as they come (nothing has been skipped yet: this is the stream's first packet) */
        d->numbered = 0;
        d->skipping = SKIP_NONE;
        d->dec->skip_frame = AVDISCARD_DEFAULT;
    }
    int64_t when = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pkt->pts;
    if (when != AV_NOPTS_VALUE && when > d->frontier)
        d->frontier = when;
    if ((pkt->flags & AV_PKT_FLAG_KEY) && pkt->pts != AV_NOPTS_VALUE &&
        pkt->dts != AV_NOPTS_VALUE && ts_add(pkt->pts, -pkt->dts) > d->key_delay)
        d->key_delay = ts_add(pkt->pts, -pkt->dts);
    if (!d->numbered || (pkt->flags & AV_PKT_FLAG_DISCARD))
        return 0;
    int64_t pts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
    if (pts == AV_NOPTS_VALUE) /* untimed: shown after what came before it */
        pts = d->last_key == INT64_MIN ? INT64_MIN : ts_add(d->last_key, 1);
    if (pts > d->last_key)
        d->last_key = pts;
    return vfi_framenum_add(&d->ledger, pts) < 0 ? AVERROR(ENOMEM) : 0;
}

/* The next packet of the stream from the demuxer, counted; other streams' are dropped. */
static int demux_packet(vf_decoder *d, AVPacket *pkt)
{
    for (;;) {
        int ret = av_read_frame(d->fmt, pkt);
        if (ret < 0)
            return ret;
        if (pkt->stream_index == d->meta.stream_index) {
            ret = count_packet(d, pkt);
            if (ret < 0)
                av_packet_unref(pkt);
            return ret;
        }
        av_packet_unref(pkt);
    }
}

/* The next packet for the decoder into d->pkt: one read ahead first, else from the demuxer. */
static int next_packet(vf_decoder *d)
{
    AVPacket *pkt = vfi_pktq_pop(&d->ahead);
    if (pkt) {
        av_packet_move_ref(d->pkt, pkt);
        av_packet_free(&pkt);
        return 0;
    }
    if (d->ahead_end < 0) {
        int ret = d->ahead_end;
        d->ahead_end = 0;
        return ret;
    }
    return demux_packet(d, d->pkt);
}

/*
 * Before numbering a frame shown at pts: read on (holding the packets for the decoder) until
 * every packet shown before it has been counted - until one decoded at or after pts. Decoders
 * usually hold enough already; a key frame decoded on its own, whose open GOP's leading frames
 * follow it, does not. VF_ERR_NOMEM only; reading's end or failure is met again in order.
 */
static vf_status read_ahead(vf_decoder *d, int64_t pts, vf_err *err)
{
    for (int n = 0; d->frontier < pts && d->ahead_end == 0 && n < READ_AHEAD_MAX; n++) {
        AVPacket *pkt = av_packet_alloc();
        if (!pkt)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        int ret = demux_packet(d, pkt);
        if (ret < 0) {
            av_packet_free(&pkt);
            if (ret == AVERROR(ENOMEM))
                return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
            d->ahead_end = ret;
            break;
        }
        if (vfi_pktq_push(&d->ahead, pkt) < 0) {
            av_packet_free(&pkt);
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        }
    }
    return VF_OK;
}

/* vfi_decoder_open's phases. The video stream to decode (*si) and its decoder (*codec): the best
 * one that is not cover art; none, text read as pictures, or a codec this FFmpeg lacks fail. */
static vf_status find_stream(vf_decoder *d, const AVCodec **codec_out, int *si_out, vf_err *err)
{
    const AVCodec *codec = NULL;
    vf_status rc = VF_OK;
    for (unsigned i = 0; i < d->fmt->nb_streams; i++) {
        const AVStream *st = d->fmt->streams[i];
        d->meta.n_video_streams += st->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
                                   !(st->disposition & AV_DISPOSITION_ATTACHED_PIC);
    }
    int si = av_find_best_stream(d->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (si >= 0 && (d->fmt->streams[si]->disposition & AV_DISPOSITION_ATTACHED_PIC) &&
        d->meta.n_video_streams == 0)
        si = AVERROR_STREAM_NOT_FOUND; /* cover art of an audio file is not a video */
    if (si == AVERROR_STREAM_NOT_FOUND || d->meta.n_video_streams == 0)
        return vfi_fail(err, VF_ERR_DECODE, "no video stream (%u stream%s, none of them video)",
                        d->fmt->nb_streams, d->fmt->nb_streams == 1 ? "" : "s");
    if (si >= 0 && vfi_probe_text_art(d->fmt->streams[si]->codecpar))
        return vfi_fail(err, VF_ERR_DECODE,
                        "not a video or image file (FFmpeg reads it as text: %s)",
                        d->fmt->iformat->name);
    if (si < 0 || !codec) {
        const AVStream *st = d->fmt->streams[si >= 0 ? si : 0];
        const AVCodecParameters *par = st->codecpar;
        char tag[AV_FOURCC_MAX_STRING_SIZE] = "";
        if (par->codec_tag)
            av_fourcc_make_string(tag, par->codec_tag);
        if (par->codec_id == AV_CODEC_ID_NONE)
            rc = vfi_fail(err, VF_ERR_UNSUPPORTED, "unsupported video codec%s%s%s",
                          tag[0] ? " (FourCC '" : " (unknown to FFmpeg)", tag, tag[0] ? "')" : "");
        else
            rc = vfi_fail(err, VF_ERR_UNSUPPORTED,
                          "unsupported video codec: this FFmpeg has no decoder for %s",
                          avcodec_get_name(par->codec_id));
        return rc;
    }
    *codec_out = codec;
    *si_out = si;
    return VF_OK;
}

/* The decoder of stream st opened (on the hardware device where one is given and can), threads
 * and the pixel bound set; a frame size it cannot use fails. */
static vf_status open_codec(vf_decoder *d, const char *path, const AVCodec *codec, AVStream *st,
                            int64_t max_pixels, vf_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    vf_status rc = VF_OK;
    d->dec = avcodec_alloc_context3(codec);
    d->pkt = av_packet_alloc();
    d->tmp = av_frame_alloc();
    if (!d->dec || !d->pkt || !d->tmp)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    snprintf(d->meta.codec, sizeof(d->meta.codec), "%s", codec->name);
    d->hw_fmt = d->o.hw ? vfi_hwdev_format(codec, d->o.hw) : AV_PIX_FMT_NONE;
    if (d->o.hw && d->hw_fmt == AV_PIX_FMT_NONE)
        vfi_log(VF_LOG_INFO, "decode",
                "%s: this FFmpeg cannot decode %s on %s: decoding on the CPU", path, codec->name,
                vfi_hwdev_name(d->o.hw));
    if (d->hw_fmt != AV_PIX_FMT_NONE && !(d->sw = av_frame_alloc()))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    int ret = avcodec_parameters_to_context(d->dec, st->codecpar);
    if (ret >= 0 && d->hw_fmt != AV_PIX_FMT_NONE) {
        d->dec->opaque = d;
        d->dec->get_format = pick_format;
        if (!(d->dec->hw_device_ctx = av_buffer_ref(vfi_hwdev_context(d->o.hw))))
            ret = AVERROR(ENOMEM);
    }
    if (ret >= 0) {
        d->dec->thread_count = d->o.threads;
        /* the device decodes one frame at a time; frame threads would only hold more of its
         * surfaces */
        d->dec->thread_type =
            d->hw_fmt != AV_PIX_FMT_NONE ? FF_THREAD_SLICE : FF_THREAD_FRAME | FF_THREAD_SLICE;
        d->dec->pkt_timebase = st->time_base;
        d->dec->max_pixels = max_pixels;
        ret = avcodec_open2(d->dec, codec, NULL);
    }
    if (ret < 0)
        return vfi_fail(err, VF_ERR_DECODE, "cannot open the %s decoder: %s", codec->name,
                        vfi_ff_err(ret, eb, sizeof(eb)));
    if (st->codecpar->width < 1 || st->codecpar->height < 1 || st->codecpar->width > 32768 ||
        st->codecpar->height > 32768) {
        /* the decoder's own reason where it gave one ("Picture size 65535x65535 is invalid"):
         * the size it read is then not known here (0x0) */
        if (!st->codecpar->width && vfi_ff_first_error()[0])
            rc = vfi_fail(err, VF_ERR_DECODE, "unusable frame size: %s", vfi_ff_first_error());
        else
            rc = vfi_fail(err, VF_ERR_DECODE, "unusable frame size %dx%d", st->codecpar->width,
                          st->codecpar->height);
        return rc;
    }
    return VF_OK;
}

/* What the file says of stream st (index si): size, rotation, pixel format, rate, duration,
 * frames, start, into d->meta. */
static void fill_meta(vf_decoder *d, const AVStream *st, int si)
{
    vf_video_meta *m = &d->meta;
    m->width = st->codecpar->width;
    m->height = st->codecpar->height;
    m->rotation = stream_rotation(st);
    m->stream_index = si;
    const char *pf = av_get_pix_fmt_name((enum AVPixelFormat)st->codecpar->format);
    snprintf(m->pix_fmt, sizeof(m->pix_fmt), "%s", pf ? pf : "unknown");
    AVRational fr =
        st->avg_frame_rate.num && st->avg_frame_rate.den ? st->avg_frame_rate : st->r_frame_rate;
    m->frame_rate = fr.num && fr.den ? av_q2d(fr) : 0.0;
    m->duration = d->fmt->duration != AV_NOPTS_VALUE ? d->fmt->duration / (double)AV_TIME_BASE
                  : st->duration != AV_NOPTS_VALUE   ? st->duration * av_q2d(d->tb)
                                                     : 0.0;
    m->nb_frames = st->nb_frames > 0 ? st->nb_frames : 0;
    m->start_time = d->origin * av_q2d(d->tb);
}

vf_status vfi_decoder_open(const char *path, const vf_sampling *sampling,
                           const vf_decode_opts *opts, vf_decoder **out, vf_err *err)
{
    vf_status rc = VF_OK;
    vfi_ff_log_init();
    vf_decoder *d = vfi_calloc(1, sizeof(*d));
    if (!d)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    d->s = *sampling;
    if (opts)
        d->o = *opts;
    if (d->s.every < 1)
        d->s.every = 1;
    d->watch = (vf_watchdog){.cancel = d->o.cancel, .timeout = d->o.stall_timeout};
    vfi_watchdog_rearm(&d->watch);
    vfi_framenum_init(&d->ledger);
    d->last_pos = -1;
    d->seek_entry = -1;
    d->sought = -1;
    d->held_to = INT64_MIN;
    d->frontier = INT64_MIN;
    d->last_key = INT64_MIN;
    d->skip_hi = INT64_MIN;
    d->prev_shown = INT64_MIN;
    d->fd = -1;
    d->last_pts = AV_NOPTS_VALUE;
    d->window_first = -1;

    d->fmt = avformat_alloc_context();
    if (!d->fmt) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    d->fmt->interrupt_callback.callback = vfi_watchdog_interrupt;
    d->fmt->interrupt_callback.opaque = &d->watch;
    if ((rc = open_pipe_io(d, path, err)) < 0)
        goto fail;
    if (!(d->conf = vfi_calloc(1, sizeof(*d->conf)))) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int64_t max_pixels = d->o.max_pixels > 0 ? d->o.max_pixels : VF_DEFAULT_MAX_PIXELS;
    if ((rc = vfi_probe_open(&d->fmt, path, d->o.archive,
                             d->o.max_streams > 0 ? d->o.max_streams : VF_DEFAULT_MAX_STREAMS,
                             max_pixels, &d->watch, d->conf, err)) < 0)
        goto fail;
    const AVCodec *codec = NULL;
    int si = -1;
    if ((rc = find_stream(d, &codec, &si, err)) < 0)
        goto fail;
    AVStream *st = d->fmt->streams[si];
    if ((int64_t)st->codecpar->width * st->codecpar->height > max_pixels) {
        rc = vfi_probe_pixels_refused(st->codecpar, max_pixels, err);
        goto fail;
    }
    for (unsigned i = 0; i < d->fmt->nb_streams; i++)
        d->fmt->streams[i]->discard = (int)i == si ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
    if ((rc = open_codec(d, path, codec, st, max_pixels, err)) < 0)
        goto fail;

    d->tb = st->time_base;
    int64_t fmt_start = d->fmt->start_time;
    if (fmt_start != AV_NOPTS_VALUE)
        d->origin = av_rescale_q(fmt_start, AV_TIME_BASE_Q, d->tb);
    else if (st->start_time != AV_NOPTS_VALUE)
        d->origin = st->start_time;
    d->numbered = !(d->fmt->iformat->flags & AVFMT_NOTIMESTAMPS);
    if (d->s.keyframes && d->numbered)
        d->dec->skip_frame = AVDISCARD_NONKEY;

    fill_meta(d, st, si);

    d->next_t = d->s.start;
    d->start_pending = d->s.start > 0.0; /* once the first packet says if frames are numbered */
    *out = d;
    return VF_OK;
fail:
    vfi_decoder_free(&d);
    return rc;
}

/* Decide whether the decoded frame in d->tmp is wanted; 1 keep, 0 drop, -1 past the window. */
static int sample(vf_decoder *d, double t, int64_t ordinal)
{
    const vf_sampling *s = &d->s;
    if (t < s->start - T_EPS)
        return 0;
    if (s->duration > 0.0 && t >= s->start + s->duration - T_EPS)
        return -1;
    if (d->window_first < 0)
        d->window_first = ordinal;
    if (s->keyframes)
        return 1;
    if (s->every > 1 && (ordinal - d->window_first) % s->every)
        return 0;
    if (s->fps > 0.0) {
        if (t < d->next_t - T_EPS)
            return 0;
        double slot = floor((t - s->start) * s->fps + T_EPS);
        d->next_t = s->start + (slot + 1.0) / s->fps;
    }
    return 1;
}

/* A packet the decoder does not decode whole: frames after it are numbered from the ledger. */
static void note_skipped(vf_decoder *d, const AVPacket *pkt)
{
    int64_t when = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
    if (when == AV_NOPTS_VALUE)
        when = INT64_MAX; /* untimed: it may be shown anywhere after */
    if (when > d->skip_hi)
        d->skip_hi = when;
}

/*
 * The number of the frame out of the decoder, shown at pts. While the decoder has been given
 * every frame since the previous one (nothing skipped is shown after it), the next ordinal:
 * ffprobe's numbering, whatever the timestamps say. Else the ledger's count of packets shown
 * before it (read on until it is complete), never below the next ordinal.
 */
static vf_status number_frame(vf_decoder *d, int64_t ordinal, int64_t pts, int64_t *index,
                              vf_err *err)
{
    if (!d->numbered) {
        *index = ordinal;
        return VF_OK;
    }
    int dense =
        d->skip_hi == INT64_MIN || (d->prev_shown != INT64_MIN && d->skip_hi < d->prev_shown);
    if (!dense) {
        vf_status rc = read_ahead(d, pts, err);
        if (rc < 0)
            return rc;
    }
    int64_t n = vfi_framenum_number(&d->ledger, pts);
    *index = dense || n < d->next_index ? d->next_index : n;
    d->next_index = *index + 1;
    d->prev_shown = pts;
    return VF_OK;
}

/* After a frame: a wanted time far ahead is skipped to. */
static void plan_skip(vf_decoder *d, double t)
{
    if (d->s.fps > 0.0 && !d->o.shots && !d->s.keyframes && d->next_t - t > SKIP_MIN_GAP)
        skip_ahead(d, d->next_t);
}

/*
 * Before a packet goes to the decoder: a frame no other frame refers to, shown before the next
 * wanted time, can never be kept (the wanted time only moves forward), so the decoder may drop
 * it. Judged on the packet's own presentation time when it is sent, which is when the decoder
 * (and each of its frame threads) reads the setting.
 */
static void set_skip(vf_decoder *d, const AVPacket *pkt)
{
    if (d->s.keyframes && d->numbered)
        return; /* AVDISCARD_NONKEY throughout */
    int drop = d->numbered && !d->o.shots && pkt->pts != AV_NOPTS_VALUE &&
               ts_seconds(d, pkt->pts) < d->next_t - T_EPS;
    d->dec->skip_frame = drop ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
    if (drop)
        note_skipped(d, pkt);
}

/* One frame's duration in the stream's time base: the frame's own, else the frame rate's. */
static int64_t frame_ticks(const vf_decoder *d)
{
    if (d->tmp->pkt_duration > 0)
        return d->tmp->pkt_duration;
    if (d->meta.frame_rate > 0 && d->tb.num > 0) {
        double ticks = 1.0 / (d->meta.frame_rate * av_q2d(d->tb));
        if (ticks >= 0.5 && ticks < 0x1p62) /* rates a file claims can be anything */
            return llround(ticks);
    }
    return 1;
}

/*
 * The stream has ended (the decoder is drained). Failed: nothing decoded, or a read error that
 * is not the file's end (an I/O error). Done otherwise, with a note when it is not whole:
 *   - the data stops early (the demuxer found the file shorter than its index, or the last
 *     packets did not decode and nothing came after them): "partial: N of M frames the index
 *     promises" - what FFmpeg's command line also decodes and ends without an error;
 *   - packets in the middle did not decode (FFmpeg concealed them): "K corrupt packets skipped";
 *   - a window (--start) past the end of the file: nothing in it.
 */
static vf_status end_of_stream(vf_decoder *d, vf_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    if (d->read_error && d->read_error != AVERROR_INVALIDDATA)
        return vfi_fail(err, VF_ERR_DECODE, "read error after %lld frames: %s",
                        (long long)d->decoded, vfi_ff_err(d->read_error, eb, sizeof(eb)));
    if (d->decoded == 0)
        return vfi_fail(err, VF_ERR_DECODE, "no frame could be decoded%s%s%s",
                        d->errors ? " (corrupt data: " : "", d->errors ? d->first_error : "",
                        d->errors ? ")" : "");
    size_t n = 0;
    int cut = d->read_error == AVERROR_INVALIDDATA || d->errors > d->errors_before_last;
    /* the frames the stream holds up to its cut: packets read but those that failed at its end
     * (decoded frames alone undercount when sampling let the decoder skip some) */
    int64_t frames = d->decoded;
    if (d->numbered && d->ledger.packets - (d->errors - d->errors_before_last) > frames)
        frames = d->ledger.packets - (d->errors - d->errors_before_last);
    if (cut && d->meta.nb_frames > frames)
        n += (size_t)snprintf(d->note + n, sizeof(d->note) - n,
                              "partial: %lld of %lld frames the index promises", (long long)frames,
                              (long long)d->meta.nb_frames);
    else if (cut)
        n +=
            (size_t)snprintf(d->note + n, sizeof(d->note) - n,
                             "partial: the stream breaks off after %lld frames", (long long)frames);
    if (d->errors_before_last && n < sizeof(d->note))
        n += (size_t)snprintf(d->note + n, sizeof(d->note) - n, "%s%lld corrupt packet%s skipped",
                              n ? "; " : "", (long long)d->errors_before_last,
                              d->errors_before_last == 1 ? "" : "s");
    if (d->kept == 0 && d->s.start > 0 && n < sizeof(d->note))
        snprintf(d->note + n, sizeof(d->note) - n,
                 "%sno frame at or after --start %g s (the last is at %.3f s)", n ? "; " : "",
                 d->s.start, d->last_pts == AV_NOPTS_VALUE ? 0.0 : ts_seconds(d, d->last_pts));
    return VF_EOF;
}

/* vfi_decoder_next's steps return VF_OK (a frame in f), VF_EOF, an error, or AGAIN: go round
 * again. Each that ends the input is final: the caller marks the decoder done. */
#define AGAIN 2 /* beside VF_OK and VF_EOF (1) */

/* The frame in d->tmp, number index at t, to the shot detector (copied back first from a
 * device: it stays in system memory). */
static vf_status measure_shot(vf_decoder *d, int64_t index, double t, vf_err *err)
{
    if (d->hw_fmt != AV_PIX_FMT_NONE && d->tmp->format == d->hw_fmt) {
        vf_status rc = download(d, err);
        if (rc < 0)
            return rc;
        snprintf(d->meta.hwdec, sizeof(d->meta.hwdec), "%s", vfi_hwdev_name(d->o.hw));
    }
    d->shots_end = t + (double)frame_ticks(d) * av_q2d(d->tb);
    return vfi_shot_reader_push(&d->shots, d->o.shots, d->tmp, index, t, err);
}

/* The frame the decoder gave (in d->tmp): timed, numbered and sampled; kept into f (VF_OK),
 * dropped (AGAIN), or past the window (VF_EOF). */
static vf_status take_frame(vf_decoder *d, vf_frame *f, vf_err *err)
{
    vfi_watchdog_rearm(&d->watch);
    int64_t pts = d->tmp->best_effort_timestamp;
    /* A frame without a time, or whose guessed one is not after the previous frame's
     * (a missing pts guessed from a dts that went back): the previous frame's time plus
     * a frame's duration, so that t only increases. */
    if (d->last_pts != AV_NOPTS_VALUE && (pts == AV_NOPTS_VALUE || pts <= d->last_pts))
        pts = ts_add(d->last_pts, frame_ticks(d));
    else if (pts == AV_NOPTS_VALUE)
        pts = d->origin;
    double t = ts_seconds(d, pts);
    d->last_pts = pts;
    d->errors_before_last = d->errors;
    int64_t ordinal = d->decoded++;
    int64_t index;
    vf_status nrc =
        number_frame(d, ordinal, d->tmp->pts != AV_NOPTS_VALUE ? d->tmp->pts : pts, &index, err);
    if (nrc < 0) {
        av_frame_unref(d->tmp);
        return nrc;
    }
    int keep = d->s.keyframes && !d->numbered && !d->tmp->key_frame
                   ? 0 /* every frame decoded: only the key frames are kept */
                   : sample(d, t, ordinal);
    if (keep < 0) {
        av_frame_unref(d->tmp);
        return VF_EOF;
    }
    if (d->o.shots && t >= d->s.start - T_EPS) {
        vf_status rc = measure_shot(d, index, t, err);
        if (rc < 0)
            return rc;
    }
    if (!keep) {
        av_frame_unref(d->tmp);
        plan_skip(d, t);
        return AGAIN;
    }
    if (d->hw_fmt != AV_PIX_FMT_NONE && d->tmp->format == d->hw_fmt) {
        vf_status rc = d->o.keep_on_device ? VF_OK : download(d, err);
        if (rc < 0)
            return rc;
        snprintf(d->meta.hwdec, sizeof(d->meta.hwdec), "%s", vfi_hwdev_name(d->o.hw));
    }
    av_frame_unref(f->av);
    av_frame_move_ref(f->av, d->tmp);
    f->pts = pts;
    f->t = t;
    f->index = index;
    d->kept++;
    if (d->s.max_frames > 0 && d->kept >= d->s.max_frames)
        d->done = 1;
    plan_skip(d, t);
    return VF_OK;
}

/* The decoder wants input: the packet it refused last, the next packet read (skipped, held
 * or sent), or the end (it is flushed). */
static vf_status feed(vf_decoder *d, vf_err *err)
{
    int ret;
    if (d->flushing)
        return vfi_fail(err, VF_ERR_INTERNAL, "decoder wants input after flush");
    if (d->pending) {
        set_skip(d, d->pkt);
        ret = avcodec_send_packet(d->dec, d->pkt);
        if (ret == AVERROR(EAGAIN))
            return vfi_fail(err, VF_ERR_INTERNAL, "decoder neither takes nor gives");
        d->pending = 0;
        av_packet_unref(d->pkt);
        if (ret < 0 && d->errors++ == 0)
            av_strerror(ret, d->first_error, sizeof(d->first_error));
        return AGAIN;
    }
    ret = next_packet(d);
    if (ret == AVERROR_EXIT)
        return AGAIN; /* interrupted: the checks at the top of the loop say why */
    if (ret == AVERROR(ENOMEM))
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (ret < 0 && d->skipping == SKIP_HOLDING && d->held.n) {
        /* the end came first: the last group of pictures is decoded, then the end met */
        if (release_held(d) < 0)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        d->ahead_end = ret;
        return AGAIN;
    }
    if (ret < 0) {
        if (ret != AVERROR_EOF && ret != AVERROR(EAGAIN))
            d->read_error = ret;
        d->flushing = 1;
        avcodec_send_packet(d->dec, NULL);
        return AGAIN;
    }
    if (d->start_pending) {
        d->start_pending = 0;
        if (skip_ahead(d, d->s.start)) {
            av_packet_unref(d->pkt); /* before the seek: counted, not decoded */
            return AGAIN;
        }
    }
    if (d->skipping == SKIP_HOLDING) {
        vfi_watchdog_rearm(&d->watch); /* reading, not stalled */
        if (hold_packet(d) < 0)
            return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        return AGAIN;
    }
    if (d->skipping && skip_ends(d, d->pkt))
        d->skipping = SKIP_NONE;
    if (d->skipping || (d->s.keyframes && d->numbered && !(d->pkt->flags & AV_PKT_FLAG_KEY))) {
        if (d->skipping)
            vfi_watchdog_rearm(&d->watch); /* reading, not stalled */
        note_skipped(d, d->pkt);
        av_packet_unref(d->pkt);
        return AGAIN;
    }
    set_skip(d, d->pkt);
    ret = avcodec_send_packet(d->dec, d->pkt);
    if (ret == AVERROR(EAGAIN)) {
        d->pending = 1; /* receive first, then send it again */
        return AGAIN;
    }
    av_packet_unref(d->pkt);
    if (ret < 0 && d->errors++ == 0) /* a corrupt packet: FFmpeg conceals what it can */
        av_strerror(ret, d->first_error, sizeof(d->first_error));
    /* Given only key frames, a decoder may show them out of order (H.264's picture order
     * counts assume the frames between): each is drained on its own, then the decoder
     * starts afresh at the next. */
    if (d->s.keyframes && d->numbered && ret >= 0) {
        avcodec_send_packet(d->dec, NULL);
        d->key_drain = 1;
    }
    return AGAIN;
}

/* One step: the input's checks, then a frame from the decoder, or its end, or input for it. */
static vf_status step(vf_decoder *d, vf_frame *f, vf_err *err)
{
    if (d->o.cancel && atomic_load(d->o.cancel))
        return vfi_fail(err, VF_ERR_CANCELLED, "cancelled");
    if (vfi_watchdog_expired(&d->watch))
        return vfi_fail(err, VF_ERR_DECODE,
                        "stalled: no frame decoded for %g s (after %lld frames)",
                        d->o.stall_timeout, (long long)d->decoded);
    int ret = avcodec_receive_frame(d->dec, d->tmp);
    if (ret >= 0)
        return take_frame(d, f, err);
    if (ret == AVERROR_EOF && d->key_drain) { /* the key frame is out: on to the next */
        avcodec_flush_buffers(d->dec);
        d->key_drain = 0;
        return AGAIN;
    }
    if (ret == AVERROR_EOF)
        return end_of_stream(d, err);
    if (ret != AVERROR(EAGAIN)) {
        /* One frame the decoder could not make (a frame-threaded decoder says so here,
         * others when the packet is sent): FFmpeg conceals what it can; keep going, as
         * its command line does. Where the stream ends counts in end_of_stream. */
        if (d->errors++ == 0)
            av_strerror(ret, d->first_error, sizeof(d->first_error));
        return AGAIN;
    }
    return feed(d, err);
}

vf_status vfi_decoder_shots(vf_decoder *d, const vf_shot **shots, int *n, vf_err *err)
{
    return vfi_shot_reader_finish(d->shots, d->shots_end, shots, n, err);
}

vf_status vfi_decoder_next(vf_decoder *d, vf_frame *f, vf_err *err)
{
    for (;;) {
        if (d->conf->refused[0]) { /* met while reading: the input fails, whatever came first */
            d->done = 1;
            return vfi_confine_check(d->conf, err);
        }
        if (d->done)
            return VF_EOF;
        vf_status rc = step(d, f, err);
        if (rc == AGAIN)
            continue;
        if (rc != VF_OK)
            d->done = 1;
        return rc;
    }
}
