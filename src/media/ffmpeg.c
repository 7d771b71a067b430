/*
 * ffmpeg.c - FFmpeg glue the media files share: FFmpeg's own log routed into vidfeat's, the
 * first error it logged on this thread (what a failed open means), and its error codes as text.
 */
#include "media/ffmpeg.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/parseutils.h>
#include <libswscale/swscale.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"

/* FFmpeg's own messages (concealed errors, deprecation notes) go to our log at debug level:
 * every failure that matters is reported by vidfeat itself, once, naming the file. */
/* FFmpeg's first error message on this thread since it was cleared: opening a file runs the
 * demuxer on the calling thread, and when it fails its log line ("Picture size 60000x60000 is
 * invalid") says far more than the error code it returns (which for that case reads "Device or
 * resource busy"); the first says the cause, later ones its consequences ("Invalid image
 * size"). A thread-local diagnostic, not shared state: each decode thread sees only its own. */
static _Thread_local char last_av_error[256];

static void av_log_bridge(void *avcl, int level, const char *fmt, va_list ap)
{
    (void)avcl;
    if (level > AV_LOG_WARNING)
        return;
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (n && level <= AV_LOG_ERROR && !last_av_error[0]) { /* the first: the cause */
        size_t k = n < sizeof(last_av_error) - 1 ? n : sizeof(last_av_error) - 1; /* truncate */
        memcpy(last_av_error, line, k);
        last_av_error[k] = '\0';
    }
    if (n)
        vfi_log(VF_LOG_DEBUG, "ffmpeg", "%s", line);
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void install_log_bridge(void)
{
    av_log_set_callback(av_log_bridge);
}

const char *vfi_ff_err(int code, char *buf, size_t size)
{
    av_strerror(code, buf, size);
    return buf;
}

void vfi_ff_log_init(void)
{
    pthread_once(&log_once, install_log_bridge);
}

void vfi_ff_error_clear(void)
{
    last_av_error[0] = '\0';
}

const char *vfi_ff_first_error(void)
{
    return last_av_error;
}

vf_status vfi_parse_time(const char *text, double *seconds)
{
    int64_t us;
    if (!text || !text[0] || av_parse_time(&us, text, 1) < 0)
        return VF_ERR_INVALID;
    *seconds = (double)us / 1e6;
    return VF_OK;
}

void vfi_decode_versions(char *buf, size_t size)
{
    unsigned f = avformat_version(), c = avcodec_version(), s = swscale_version();
    snprintf(buf, size, "libavformat %u.%u.%u, libavcodec %u.%u.%u, libswscale %u.%u.%u", f >> 16,
             (f >> 8) & 255, f & 255, c >> 16, (c >> 8) & 255, c & 255, s >> 16, (s >> 8) & 255,
             s & 255);
}

void vfi_watchdog_rearm(vf_watchdog *w)
{
    w->deadline = w->timeout > 0 ? vfi_now_s() + w->timeout : 0;
}

int vfi_watchdog_expired(const vf_watchdog *w)
{
    return w->stalled || (w->deadline > 0 && vfi_now_s() > w->deadline);
}

int vfi_watchdog_interrupt(void *opaque)
{
    vf_watchdog *w = opaque;
    if (w->cancel && atomic_load(w->cancel))
        return 1;
    if (w->deadline > 0 && vfi_now_s() > w->deadline) {
        w->stalled = 1;
        return 1;
    }
    return 0;
}

int vfi_pktq_push(vf_pktq *q, AVPacket *pkt)
{
    if (q->n == q->cap) {
        int cap = q->cap ? q->cap * 2 : 16;
        AVPacket **p = vfi_mallocarray((size_t)cap, sizeof(*p));
        if (!p)
            return AVERROR(ENOMEM);
        for (int i = 0; i < q->n; i++)
            p[i] = q->p[(q->head + i) % q->cap];
        vfi_free(q->p);
        q->p = p;
        q->cap = cap;
        q->head = 0;
    }
    q->p[(q->head + q->n++) % q->cap] = pkt;
    q->bytes += (size_t)pkt->size;
    return 0;
}

AVPacket *vfi_pktq_pop(vf_pktq *q)
{
    if (!q->n)
        return NULL;
    AVPacket *pkt = q->p[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    q->bytes -= (size_t)pkt->size;
    return pkt;
}

void vfi_pktq_drop(vf_pktq *q)
{
    AVPacket *pkt;
    while ((pkt = vfi_pktq_pop(q)))
        av_packet_free(&pkt);
}

void vfi_pktq_free(vf_pktq *q)
{
    vfi_pktq_drop(q);
    vfi_free(q->p);
    memset(q, 0, sizeof(*q));
}
