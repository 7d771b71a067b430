/*
 * window.c - see window.h.
 */
#include "pipeline/window.h"

#include "media/preprocess.h"

void vfi_windows_begin(vf_windows *w)
{
    w->received = 0;
    w->next = 0;
    w->taken = 0;
}

int vfi_windows_add(vf_windows *w)
{
    int64_t f = w->received++;
    /* the last window starting at or before f; a stride longer than the window leaves gaps */
    int64_t start = f / w->stride * w->stride;
    if (f - start >= w->frames)
        return -1;
    return vfi_windows_slot(w, f);
}

int vfi_windows_next(vf_windows *w, int at_end, vf_window_span *span)
{
    int64_t n = w->received;
    if (w->next + w->frames <= n) { /* complete */
        span->first = w->next;
        span->count = w->frames;
    } else {
        /* the end of the file: one more window when it holds frames no window taken held
         * (the previous one, complete, ended at next - stride + frames) */
        int64_t covered = w->taken ? w->next - w->stride + w->frames : 0;
        if (!at_end || w->next >= n || n <= covered)
            return 0;
        span->first = w->next;
        span->count = (int)(n - w->next);
    }
    w->next += w->stride;
    w->taken++;
    return 1;
}

void vfi_windows_put(const vf_windows *w, const vf_window_span *span, const float *ring,
                     size_t plane, float *row)
{
    for (int t = 0; t < w->frames; t++) {
        int64_t f = span->first + (t < span->count ? t : span->count - 1);
        vfi_window_put(row, w->frames, t, ring + (size_t)vfi_windows_slot(w, f) * 3 * plane, plane);
    }
}
