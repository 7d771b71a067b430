/*
 * log.c - the log sink. The callback, its user pointer and the level threshold are the library's
 * only global mutable state; they are set together under a mutex and read under it, so a
 * callback change races with nothing. The default sink writes "vidfeat[tag]: msg" to stderr.
 */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static vf_log_fn sink_fn;
static void *sink_user;
static int sink_level = VF_LOG_WARNING;

void vf_set_log_callback(vf_log_fn fn, void *user, int max_level)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = user;
    sink_level = max_level;
    pthread_mutex_unlock(&sink_lock);
}

void vfi_log(int level, const char *tag, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    pthread_mutex_lock(&sink_lock);
    vf_log_fn fn = sink_fn;
    void *user = sink_user;
    int max_level = sink_level;
    pthread_mutex_unlock(&sink_lock);
    if (level > max_level)
        return;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (fn)
        fn(user, level, tag, line);
    else
        fprintf(stderr, "vidfeat[%s]: %s\n", tag, line);
}
