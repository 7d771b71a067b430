/*
 * ffmpeg.h - FFmpeg glue the media files share (ffmpeg.c): its log, errors, times, a packet
 * queue. Its messages go to vidfeat's log at debug level: every failure that matters is
 * reported by vidfeat itself, once, naming the file.
 */
#ifndef VIDFEAT_FFMPEG_H
#define VIDFEAT_FFMPEG_H

#include <stdatomic.h>
#include <stddef.h>

#include "core/status.h"

/* A reader's watchdog, which FFmpeg's I/O checks between reads (its interrupt callback,
 * vfi_watchdog_interrupt): a cancel flag, and a deadline `timeout` seconds after the last
 * rearm, so that a source that trickles data or sends none is given up. */
typedef struct vf_watchdog {
    const atomic_int *cancel; /* (borrowed, optional) non-zero stops reading at once */
    double timeout;           /* seconds; 0: no deadline */
    double deadline;          /* monotonic seconds; 0: none */
    int stalled;              /* the callback stopped a read on the deadline */
} vf_watchdog;

/* The deadline timeout seconds from now (none without a timeout). */
void vfi_watchdog_rearm(vf_watchdog *w);
/* FFmpeg's interrupt callback (opaque: the watchdog): 1 to stop, when cancelled or past the
 * deadline (stalled then set), else 0. */
int vfi_watchdog_interrupt(void *w);
/* Is the deadline past (or was a read stopped on it)? */
int vfi_watchdog_expired(const vf_watchdog *w);

/* Packets, oldest first, owned by the queue (the decoder's packets read ahead of it, or held
 * while skipping): a ring that grows by doubling. Zeroed is empty. */
struct AVPacket;
typedef struct vf_pktq {
    struct AVPacket **p;
    int cap, head, n;
    size_t bytes; /* the packets' sizes, summed */
} vf_pktq;

/* Take pkt at the end; AVERROR(ENOMEM) leaves it with the caller. */
int vfi_pktq_push(vf_pktq *q, struct AVPacket *pkt);
/* The oldest packet, now the caller's; NULL when empty. */
struct AVPacket *vfi_pktq_pop(vf_pktq *q);
/* Free the packets, keep the storage. */
void vfi_pktq_drop(vf_pktq *q);
/* Free the packets and the storage: empty again. */
void vfi_pktq_free(vf_pktq *q);

/* Route FFmpeg's log into vidfeat's (once per process; any thread may call it). */
void vfi_ff_log_init(void);
/* FFmpeg's first error message on this thread since it was cleared ("" when none): a failed
 * open's log line ("Picture size 60000x60000 is invalid") says far more than its error code. */
void vfi_ff_error_clear(void);
const char *vfi_ff_first_error(void);
/* An FFmpeg error code as text, in buf. */
const char *vfi_ff_err(int code, char *buf, size_t size);

/* A time or duration in FFmpeg's forms ("90", "1.5", "1:30", "01:02:03.5", "500ms") into
 * seconds, negative ones included; VF_ERR_INVALID when text is none of them. */
vf_status vfi_parse_time(const char *text, double *seconds);

/* "libavformat 59.27.100 ..." */
void vfi_decode_versions(char *buf, size_t size);

#endif /* VIDFEAT_FFMPEG_H */
