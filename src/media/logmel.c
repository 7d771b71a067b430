/*
 * logmel.c - log mel-band energies of a streamed signal (logmel.h); the only file that sees FFTW.
 *
 * Frame i: the samples it covers (reflected at the signal's ends when centred) times a periodic
 * Hann window, zero-padded to n_fft, transformed (FFTW, real to complex, in double); each band
 * sums the bins' magnitude (or power) under its triangle; then the log. The bands' weights are
 * made once, as the model's reference makes them: VGGish's mel_features draws each triangle over
 * mel between three consecutive of n_mels + 2 points evenly spaced in mel, and gives the DC bin
 * no weight; librosa (and torchaudio) draw it over Hz between the same points converted back to
 * Hz, and scale it by 2 / its width with norm="slaney".
 */
#include "media/logmel.h"

#include <fftw3.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "core/mem.h"

#define MAX_FFT 65536
#define PI      3.14159265358979323846

struct vf_logmel {
    vf_logmel_cfg c;
    int pad;          /* samples reflected before the signal (centred), else 0 */
    int bins;         /* n_fft / 2 + 1 */
    double *window;   /* c.window values */
    double *weights;  /* n_mels x bins, row by band */
    int *first, *end; /* each band's bins with weight: [first, end) */
    double *in;       /* a frame, n_fft */
    fftw_complex *spec;
    double *mag; /* bins */
    fftw_plan plan;
    /* The signal: head holds its first pad + 1 samples (what frame 0 reflects); buf the samples
     * [buf_start, buf_start + buf_len) that frames still to come read. */
    float *head;
    int head_len;
    float *buf;
    int64_t buf_start;
    int buf_len, cap;
    int64_t received; /* samples pushed */
    int ended;
    int64_t next; /* the next frame's number */
};

static double hz_to_mel(vf_mel_scale s, double f)
{
    if (s == VF_MEL_HTK)
        return 1127.0 * log(1.0 + f / 700.0);
    const double f_sp = 200.0 / 3, step = log(6.4) / 27;
    return f < 1000 ? f / f_sp : 1000 / f_sp + log(f / 1000) / step;
}

static double mel_to_hz(vf_mel_scale s, double m)
{
    if (s == VF_MEL_HTK)
        return 700.0 * (exp(m / 1127.0) - 1.0);
    const double f_sp = 200.0 / 3, step = log(6.4) / 27;
    return m < 1000 / f_sp ? m * f_sp : 1000 * exp(step * (m - 1000 / f_sp));
}

const char *vfi_logmel_check(const vf_logmel_cfg *c)
{
    if (c->sample_rate < 1000 || c->sample_rate > 384000)
        return "a sample rate outside 1 to 384 kHz";
    if (c->n_fft < 2 || c->n_fft > MAX_FFT || c->n_fft % 2 != 0)
        return "an FFT length that is not an even number up to 65536";
    if (c->window < 2 || c->window > c->n_fft)
        return "a window shorter than 2 samples or longer than the FFT";
    if (c->hop < 1 || c->hop > c->sample_rate * 10)
        return "a hop of less than a sample or more than 10 s";
    if (c->center && c->window != c->n_fft)
        return "centred frames with a window shorter than the FFT (torch centres the window "
               "inside; not done here)";
    if (c->power != 1 && c->power != 2)
        return "a power other than 1 (magnitude) or 2";
    if (c->n_mels < 1 || c->n_mels > VF_MAX_MELS)
        return "a number of mel bands outside 1 to 1024";
    if (!(c->fmin >= 0 && c->fmin < c->fmax && c->fmax <= c->sample_rate / 2.0))
        return "a band range that is not 0 <= fmin < fmax <= half the sample rate";
    if (!(c->log_offset > 0 && c->log_offset < 1))
        return "a log offset outside (0, 1)";
    return "";
}

int64_t vfi_logmel_count(const vf_logmel_cfg *c, int64_t n)
{
    if (c->center)
        return n > c->n_fft / 2 ? 1 + n / c->hop : 0;
    return n >= c->window ? 1 + (n - c->window) / c->hop : 0;
}

static void make_weights(vf_logmel *m)
{
    const vf_logmel_cfg *c = &m->c;
    int pts = c->n_mels + 2;
    double lo = hz_to_mel(c->scale, c->fmin), hi = hz_to_mel(c->scale, c->fmax);
    for (int b = 0; b < c->n_mels; b++) {
        double e[3], f[3];
        for (int j = 0; j < 3; j++) {
            e[j] = b + j == pts - 1 ? hi : lo + (hi - lo) * (b + j) / (pts - 1);
            f[j] = mel_to_hz(c->scale, e[j]);
        }
        double norm = c->slaney_norm ? 2.0 / (f[2] - f[0]) : 1.0;
        double *w = m->weights + (size_t)b * m->bins;
        m->first[b] = m->bins;
        m->end[b] = 0;
        for (int k = c->triangles_in_mel ? 1 : 0; k < m->bins; k++) {
            double hz = (double)k * (c->sample_rate / 2.0) / (m->bins - 1), up, down;
            if (c->triangles_in_mel) {
                double mel = hz_to_mel(c->scale, hz);
                up = (mel - e[0]) / (e[1] - e[0]);
                down = (e[2] - mel) / (e[2] - e[1]);
            } else {
                up = (hz - f[0]) / (f[1] - f[0]);
                down = (f[2] - hz) / (f[2] - f[1]);
            }
            double v = fmax(0.0, fmin(up, down)) * norm;
            w[k] = v;
            if (v > 0) {
                m->first[b] = k < m->first[b] ? k : m->first[b];
                m->end[b] = k + 1;
            }
        }
    }
}

/* FFTW's planner keeps process-wide state: made safe for plans made on several threads once. */
static pthread_once_t planner_once = PTHREAD_ONCE_INIT;

static void planner_safe(void)
{
    fftw_make_planner_thread_safe();
}

vf_status vfi_logmel_new(const vf_logmel_cfg *cfg, vf_logmel **out, vf_err *err)
{
    *out = NULL;
    const char *why = vfi_logmel_check(cfg);
    if (*why)
        return vfi_fail(err, VF_ERR_INVALID, "an audio front end of %s", why);
    vf_logmel *m = vfi_calloc(1, sizeof(*m));
    if (!m)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    m->c = *cfg;
    m->pad = cfg->center ? cfg->n_fft / 2 : 0;
    m->bins = cfg->n_fft / 2 + 1;
    m->window = vfi_malloc(sizeof(double) * (size_t)cfg->window);
    m->weights = vfi_calloc((size_t)cfg->n_mels * (size_t)m->bins, sizeof(double));
    m->first = vfi_malloc(sizeof(int) * (size_t)cfg->n_mels);
    m->end = vfi_malloc(sizeof(int) * (size_t)cfg->n_mels);
    m->mag = vfi_malloc(sizeof(double) * (size_t)m->bins);
    m->head = vfi_malloc(sizeof(float) * (size_t)(m->pad + 1));
    m->in = fftw_malloc(sizeof(double) * (size_t)cfg->n_fft);
    m->spec = fftw_malloc(sizeof(fftw_complex) * (size_t)m->bins);
    if (m->window && m->in && m->spec) {
        pthread_once(&planner_once, planner_safe);
        m->plan = fftw_plan_dft_r2c_1d(cfg->n_fft, m->in, m->spec, FFTW_ESTIMATE);
    }
    if (!m->window || !m->weights || !m->first || !m->end || !m->mag || !m->head || !m->plan) {
        vfi_logmel_free(&m);
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    }
    for (int n = 0; n < cfg->window; n++)
        m->window[n] = 0.5 - 0.5 * cos(2 * PI * n / cfg->window);
    make_weights(m);
    *out = m;
    return VF_OK;
}

void vfi_logmel_free(vf_logmel **pm)
{
    vf_logmel *m = *pm;
    if (!m)
        return;
    if (m->plan)
        fftw_destroy_plan(m->plan);
    fftw_free(m->in);
    fftw_free(m->spec);
    vfi_free(m->window);
    vfi_free(m->weights);
    vfi_free(m->first);
    vfi_free(m->end);
    vfi_free(m->mag);
    vfi_free(m->head);
    vfi_free(m->buf);
    vfi_free(m);
    *pm = NULL;
}

vf_status vfi_logmel_push(vf_logmel *m, const float *x, int64_t n, vf_err *err)
{
    if (n <= 0 || m->ended)
        return VF_OK;
    for (int64_t i = 0; m->head_len <= m->pad && i < n; i++)
        m->head[m->head_len++] = x[i];
    /* drop what no frame to come reads: before the next frame's first sample, less a frame's
     * length (the last frame's reflection reads a little before its start) */
    int64_t keep = m->next * m->c.hop - m->pad - m->c.n_fft;
    if (keep > m->buf_start && keep - m->buf_start >= m->buf_len / 2) {
        int drop = keep - m->buf_start < m->buf_len ? (int)(keep - m->buf_start) : m->buf_len;
        memmove(m->buf, m->buf + drop, sizeof(float) * (size_t)(m->buf_len - drop));
        m->buf_len -= drop;
        m->buf_start += drop;
    }
    float *b = n <= INT_MAX / 2 - m->buf_len
                   ? vfi_grow(m->buf, &m->cap, m->buf_len + (int)n, sizeof(float))
                   : NULL;
    if (!b)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    m->buf = b;
    memcpy(m->buf + m->buf_len, x, sizeof(float) * (size_t)n);
    m->buf_len += n;
    m->received += n;
    return VF_OK;
}

void vfi_logmel_end(vf_logmel *m)
{
    m->ended = 1;
}

/* Sample s of the signal, reflected at its ends (s within what frames read). */
static double sample(const vf_logmel *m, int64_t s)
{
    if (s < 0)
        s = -s;
    if (s >= m->received)
        s = 2 * m->received - 2 - s;
    return s < m->head_len && s < m->buf_start ? m->head[s] : m->buf[s - m->buf_start];
}

int vfi_logmel_next(vf_logmel *m, float *out)
{
    const vf_logmel_cfg *c = &m->c;
    int64_t start = m->next * c->hop - m->pad;
    if (m->ended) {
        if (m->next >= vfi_logmel_count(c, m->received))
            return 0;
    } else {
        int64_t last = start + c->window - 1;
        if (last < m->pad)
            last = m->pad; /* frame 0 reflects sample pad */
        if (last >= m->received)
            return 0;
    }
    for (int n = 0; n < c->window; n++)
        m->in[n] = sample(m, start + n) * m->window[n];
    for (int n = c->window; n < c->n_fft; n++)
        m->in[n] = 0.0;
    fftw_execute(m->plan);
    for (int k = 0; k < m->bins; k++) {
        double p = m->spec[k][0] * m->spec[k][0] + m->spec[k][1] * m->spec[k][1];
        m->mag[k] = c->power == 2 ? p : sqrt(p);
    }
    for (int b = 0; b < c->n_mels; b++) {
        const double *w = m->weights + (size_t)b * m->bins;
        double e = 0;
        for (int k = m->first[b]; k < m->end[b]; k++)
            e += w[k] * m->mag[k];
        out[b] = (float)(c->log == VF_MEL_DB ? 10.0 * log10(fmax(e, c->log_offset))
                                             : log(e + c->log_offset));
    }
    m->next++;
    return 1;
}
