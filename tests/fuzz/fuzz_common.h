/*
 * fuzz_common.h - what the fuzz targets share: silencing vidfeat's log (warnings about odd
 * inputs are expected), and for code that reads a file by name (the manifest and calibration
 * readers, the decoder) the input's bytes in one scratch file per process, made on first use
 * under $TMPDIR and removed at exit.
 */
#ifndef VIDFEAT_FUZZ_COMMON_H
#define VIDFEAT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vidfeat.h"

static void fuzz_quiet(void *user, int level, const char *tag, const char *msg)
{
    (void)user;
    (void)level;
    (void)tag;
    (void)msg;
}

/* Only errors reach the log, and they go nowhere. */
static inline void fuzz_quiet_logs(void)
{
    vf_set_log_callback(fuzz_quiet, NULL, VF_LOG_ERROR);
}

static char fuzz_path[4096];

static void fuzz_file_remove(void)
{
    if (fuzz_path[0])
        unlink(fuzz_path);
}

/* The scratch file's name holding exactly data (NULL if it cannot be written: the input is then
 * skipped, not a finding). suffix helps readers that look at the name (".json"). */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix)
{
    if (!fuzz_path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_path, sizeof(fuzz_path), "%s/vidfeat_fuzz_XXXXXX%s",
                 dir && *dir ? dir : "/tmp", suffix);
        int fd = mkstemps(fuzz_path, (int)strlen(suffix));
        if (fd < 0) {
            fuzz_path[0] = '\0';
            return NULL;
        }
        close(fd);
        atexit(fuzz_file_remove);
    }
    FILE *f = fopen(fuzz_path, "wb");
    if (!f)
        return NULL;
    size_t n = size ? fwrite(data, 1, size, f) : 0;
    if (fclose(f) != 0 || n != size)
        return NULL;
    return fuzz_path;
}

#endif /* VIDFEAT_FUZZ_COMMON_H */
