/*
 * ffmpeg.h - FFmpeg glue the media files share (ffmpeg.c). Its messages go to vidfeat's log at
 * debug level: every failure that matters is reported by vidfeat itself, once, naming the file.
 */
#ifndef VIDFEAT_FFMPEG_H
#define VIDFEAT_FFMPEG_H

#include <stddef.h>

#include "core/status.h"

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
