/*
 * test_audio.c - a file's soundtrack for an audio model (media/audio.h) against the ffmpeg CLI
 * (tests/python/audio_refs.py): 5.1 at 48 kHz, mono at 8 kHz, AAC beside a video, a sound
 * starting 0.7 s after its video, one stopping before it, Opus in WebM, a file whose timestamps
 * jump 0.5 s ahead (the gap filled with silence, as aresample's async=1 fills it); each at 16
 * and 32 kHz. Refused, saying why: a video without sound; a file whose timestamps keep jumping
 * 100 s ahead (the silence to fill them is bounded).
 * The channels averaged and resampled as the CLI's pan + aresample give them: as many samples,
 * each within 1e-4; the first sample's time is ffprobe's first audio frame's (less the file's
 * start). Read in chunks of any size, the same samples. A video without sound is refused,
 * saying so; so is a pipe, and sound at 1 Hz; sound in frames of a million samples is read in
 * bounded memory.
 *
 * usage: test_audio DIR   (DIR/cases.tsv from audio_refs.py; exit 77 without it)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "media/audio.h"

#define TOLERANCE 1e-4

/* The whole soundtrack of path at rate, read chunk samples at a time: *n samples (malloc'd). */
static float *read_all(const char *path, int rate, int chunk, int64_t *n, vf_audio_meta *meta)
{
    vf_audio_opts o = {.sample_rate = rate};
    vf_audio *a = NULL;
    vf_err err;
    vf_status rc = vfi_audio_open(path, &o, &a, &err);
    CHECK_MSG(rc == VF_OK, "%s: %s", path, err.msg);
    *meta = *vfi_audio_meta(a);
    int64_t cap = 1 << 16, len = 0;
    float *all = malloc(sizeof(float) * (size_t)cap);
    CHECK(all);
    for (;;) {
        if (len + chunk > cap) {
            cap = 2 * (len + chunk);
            all = realloc(all, sizeof(float) * (size_t)cap);
            CHECK(all);
        }
        int got = 0;
        rc = vfi_audio_read(a, all + len, chunk, &got, &err);
        if (rc == VF_EOF)
            break;
        CHECK_MSG(rc == VF_OK, "%s: %s", path, err.msg);
        CHECK(got > 0 && got <= chunk);
        len += got;
    }
    CHECK(vfi_audio_errors(a) == 0);
    vfi_audio_free(&a);
    CHECK(a == NULL);
    *n = len;
    return all;
}

static float *slurp(const char *path, int64_t *n)
{
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f, "cannot open %s", path);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long bytes = ftell(f);
    rewind(f);
    float *x = malloc((size_t)bytes + 4);
    CHECK(x && fread(x, 1, (size_t)bytes, f) == (size_t)bytes);
    fclose(f);
    *n = bytes / (long)sizeof(float);
    return x;
}

/* The whole of path's sound at rate, discarded as read: the process's peak resident memory
 * grows by less than 64 MB (a frame of a million samples at 1 kHz is 67 MB of floats at
 * 16 kHz, more in the resampler, when resampled whole). */
static void read_bounded(const char *path, int rate)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    long before = ru.ru_maxrss; /* KiB */
    vf_audio_opts o = {.sample_rate = rate};
    vf_audio *a = NULL;
    vf_err err;
    CHECK_MSG(vfi_audio_open(path, &o, &a, &err) == VF_OK, "%s: %s", path, err.msg);
    static float buf[4096];
    int got;
    int64_t n = 0;
    vf_status rc;
    while ((rc = vfi_audio_read(a, buf, 4096, &got, &err)) == VF_OK)
        n += got;
    CHECK_MSG(rc == VF_EOF, "%s: %s", path, err.msg);
    vfi_audio_free(&a);
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
    long grew = ru.ru_maxrss - before;
    CHECK_MSG(grew < 64 * 1024, "%s: reading its sound took %ld MB more", path, grew / 1024);
    printf("%s at %d Hz: %lld samples, the peak grew by %ld MB\n", strrchr(path, '/') + 1, rate,
           (long long)n, grew / 1024);
}

int main(int argc, char **argv)
{
    char path[4096];
    FILE *cases = NULL;
    if (argc > 1) {
        snprintf(path, sizeof(path), "%s/cases.tsv", argv[1]);
        cases = fopen(path, "r");
    }
    if (!cases) {
        printf("SKIP: no references (tests/python/audio_refs.py makes them with the ffmpeg "
               "CLI)\n");
        return 77;
    }
    char line[3 * 4096 + 256];
    int n_cases = 0;
    double worst_all = 0;
    while (fgets(line, sizeof(line), cases)) {
        char file[4096], ref[4096], start[64], refusal[256];
        int rate;
        CHECK(sscanf(line, "%4095[^\t]\t%d\t%4095[^\t]\t%63[^\t]\t%255[^\n]", file, &rate, ref,
                     start, refusal) == 5);
        const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        if (!strcmp(refusal, "bounded")) { /* read through in bounded memory */
            read_bounded(file, rate);
            n_cases++;
            continue;
        }
        if (strcmp(refusal, "-")) { /* refused when opened, or while read */
            vf_audio_opts o = {.sample_rate = rate};
            vf_audio *a = NULL;
            vf_err err;
            vf_status rc = vfi_audio_open(file, &o, &a, &err);
            static float buf[4096];
            int got;
            while (rc == VF_OK && (rc = vfi_audio_read(a, buf, 4096, &got, &err)) == VF_OK)
                ;
            vfi_audio_free(&a);
            CHECK_MSG(rc == VF_ERR_DECODE && strstr(err.msg, refusal), "%s: %s", base, err.msg);
            printf("%s: refused: %s\n", base, err.msg);
            n_cases++;
            continue;
        }
        int64_t n_ref, n;
        float *want = slurp(ref, &n_ref);
        vf_audio_meta meta;
        float *got = read_all(file, rate, 4096, &n, &meta);
        CHECK_MSG(n == n_ref, "%s at %d Hz: %lld samples, the ffmpeg CLI %lld", base, rate,
                  (long long)n, (long long)n_ref);
        double worst = 0;
        for (int64_t i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)got[i] - want[i]));
        CHECK_MSG(worst <= TOLERANCE, "%s at %d Hz: a sample %.3g from the CLI's", base, rate,
                  worst);
        CHECK_MSG(fabs(meta.start - atof(start)) < 1e-6, "%s: starts at %.6f, ffprobe %s", base,
                  meta.start, start);
        /* other chunk sizes: the same samples */
        static const int chunks[] = {1, 160, 100003};
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            int64_t n2;
            vf_audio_meta m2;
            float *again = read_all(file, rate, chunks[c], &n2, &m2);
            CHECK(n2 == n && !memcmp(again, got, sizeof(float) * (size_t)n));
            free(again);
        }
        printf("%s at %d Hz: %s %d Hz x %d channels from %.3f s, %lld samples, worst %.2e\n", base,
               rate, meta.codec, meta.in_rate, meta.channels, meta.start, (long long)n, worst);
        worst_all = fmax(worst_all, worst);
        free(want);
        free(got);
        n_cases++;
    }
    fclose(cases);
    CHECK(n_cases > 0);
    printf("ok %d cases: the ffmpeg CLI's samples (worst %.2e), ffprobe's start, any chunks; "
           "a video without sound and endless gaps refused\n",
           n_cases, worst_all);

    /* a pipe: refused before it is opened (its sound cannot be read beside its pictures) */
    char fifo[] = "/tmp/vidfeat_audio_fifo_XXXXXX";
    int fd = mkstemp(fifo);
    CHECK(fd >= 0);
    close(fd);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    vf_audio_opts o = {.sample_rate = 16000};
    vf_audio *a = NULL;
    vf_err err;
    CHECK(vfi_audio_open(fifo, &o, &a, &err) == VF_ERR_UNSUPPORTED && !a);
    printf("a pipe: %s\n", err.msg);
    unlink(fifo);
    o.sample_rate = 100;
    CHECK(vfi_audio_open(fifo, &o, &a, &err) == VF_ERR_INVALID && !a);
    printf("ok a pipe and an impossible rate refused\n");
    return 0;
}
