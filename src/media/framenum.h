/*
 * framenum.h - a frame's number in presentation order, from the packets the demuxer read.
 *
 * The decoder is not told about every frame: sparse sampling lets it drop frames no other frame
 * refers to, --keyframes never sends it the others, and --start or a long gap skips whole groups
 * of pictures unread by the decoder. The demuxer still reads every packet, and each packet of a
 * video stream is one frame with its presentation time. A frame's number is then the count of
 * packets whose presentation time is before its own: exact however many frames the decoder
 * skipped, for constant and variable frame rates, with B-frames and open groups of pictures.
 *
 * That count needs every packet presented before the frame to have been read when the frame is
 * numbered. Decoders output in presentation order only once they hold every earlier packet, so
 * numbering frames as they come out of the decoder meets it.
 *
 * Memory: the times of packets read but not yet behind the last numbered frame (a reordering
 * window, or with --keyframes a group of pictures), at most FRAMENUM_MAX_PENDING of them; past
 * that the earliest are counted as presented before every later frame.
 */
#ifndef VIDFEAT_FRAMENUM_H
#define VIDFEAT_FRAMENUM_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define FRAMENUM_MAX_PENDING (1u << 20)

typedef struct vf_framenum {
    int64_t behind;  /* packets presented before every frame still to be numbered */
    int64_t *times;  /* presentation times of the other packets read, ascending, from head */
    size_t head, n;  /* times[head .. head + n) */
    size_t cap;      /* allocated entries of times */
    int64_t packets; /* packets added in all */
} vf_framenum;

/* An empty ledger (no allocation until the first packet). */
void vfi_framenum_init(vf_framenum *l);
/* A packet read, in decode order, presented at time pts (any monotonic unit). VF_ERR_NOMEM. */
vf_status vfi_framenum_add(vf_framenum *l, int64_t pts);
/* n packets not read (a seek passed them), each presented before every later frame. */
void vfi_framenum_skip(vf_framenum *l, int64_t n);
/* The number of the frame presented at pts: the packets added so far presented before it.
 * Frames are numbered in presentation order; packets presented at or before pts are then
 * retired (they precede every later frame). */
int64_t vfi_framenum_number(vf_framenum *l, int64_t pts);
void vfi_framenum_clear(vf_framenum *l);

#endif /* VIDFEAT_FRAMENUM_H */
