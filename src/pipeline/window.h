/*
 * window.h - windows of frames for a clip model: which sampled frames make each window, where a
 * converted frame waits for its windows, and a window laid out as the network's input.
 *
 * A file's sampled frames are numbered 0, 1, 2, ... in the order they are sampled. Window k holds
 * frames k x stride .. k x stride + frames - 1. A window is complete when its last frame has
 * arrived. When the file ends, its last frames that no complete window holds make one more
 * window, the last frame repeated to fill it (as the reference extractors pad); a file shorter
 * than one window gives one such window; frames between windows (a stride longer than the
 * window) belong to none and are never converted.
 *
 * Converted frames wait in a ring of `frames` pictures: frame f in slot f % frames. A window is
 * taken out as soon as it is complete, before the next frame arrives, so a slot is reused only
 * once every window holding its frame has been taken.
 *
 * Plain arithmetic and copies, no threads: the convert stage (pipeline.c) converts the frames,
 * waits for them and places the windows in its batches.
 */
#ifndef VIDFEAT_WINDOW_H
#define VIDFEAT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

typedef struct vf_windows {
    int frames;       /* frames per window (the model's) */
    int stride;       /* frames from one window's first to the next one's */
    int64_t received; /* the current file's sampled frames so far */
    int64_t next;     /* the first frame of the next window */
    int64_t taken;    /* windows taken from the current file */
} vf_windows;

/* A window ready to be taken: its first frame and how many of its frames the file has (the
 * rest repeat the last of them). */
typedef struct vf_window_span {
    int64_t first;
    int count;
} vf_window_span;

/* A new file begins. */
void vfi_windows_begin(vf_windows *w);

/* The file's next sampled frame arrives: the ring slot to convert it into, or -1 when no window
 * holds it (drop it unconverted). */
int vfi_windows_add(vf_windows *w);

/* A window ready after the frames added so far (at_end: the file has no more frames): 1 and its
 * span, and the window counts as taken; 0 when none is. Call until it returns 0. */
int vfi_windows_next(vf_windows *w, int at_end, vf_window_span *span);

/* The ring slot of frame f. */
static inline int vfi_windows_slot(const vf_windows *w, int64_t f)
{
    return (int)(f % w->frames);
}

/* Lay the window's frames out as the network reads them, [3, frames, S, S], into row: ring holds
 * `frames` converted pictures of 3 planes of `plane` floats each. */
void vfi_windows_put(const vf_windows *w, const vf_window_span *span, const float *ring,
                     size_t plane, float *row);

#endif /* VIDFEAT_WINDOW_H */
