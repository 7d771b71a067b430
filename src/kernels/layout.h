/*
 * layout.h - what vidfeat's convolutions (conv.h) and their kernels' files share: a convolution's
 * sizes, the channel-blocked pictures, the packed weights and a Winograd block's scratch.
 *
 * Pictures: oneDNN's nChw8c ("aBcd8b"), [N][C/8][H][W][8], channels padded to a multiple of 8
 * with zeros.
 * Direct weights: [ocp / 16][kh][kw][icp][16], ocp = oc padded to 16 (the pair of 8-channel
 * blocks a strip computes), icp = ic padded to 8; the padding's weights are zeros.
 * Winograd weights: [36][ocp / 16][icp][16], element (u, v) of G g G' at 6 u + v.
 * Winograd scratch: V [36][TB][icp] (the tiles' transformed inputs) then M [36][ocp / 16][TB][16]
 * (their products), TB tiles a block (vfk_wino_tiles).
 */
#ifndef VIDFEAT_KERNELS_LAYOUT_H
#define VIDFEAT_KERNELS_LAYOUT_H

#include <stddef.h>

#define VFK_BLOCK 8 /* channels a block of the layout holds */
/* The kernels' revision: part of the plan cache's keys, so that a choice measured against an
 * older kernel is measured again. */
#define VFK_REVISION 1

/* One convolution: sizes and window. Channels are the real counts (the layout pads them). */
typedef struct vfk_conv {
    int ic, oc;         /* input and output channels */
    int ih, iw, oh, ow; /* input and output sizes */
    int kh, kw;         /* kernel */
    int sh, sw;         /* stride */
    int dh, dw;         /* dilation (1: none) */
    int ph, pw;         /* padding before the first row and column (the rest follows from oh, ow) */
    float lo, hi;       /* the output clipped to [lo, hi]: -inf, inf for none; ReLU is 0, inf */
} vfk_conv;

/* Channels of a layout that pads c to a whole block. */
static inline int vfk_padded(int c)
{
    return (c + VFK_BLOCK - 1) / VFK_BLOCK * VFK_BLOCK;
}

/* Pairs of 8-channel blocks (16 channels) that oc fills. */
static inline int vfk_pairs(int oc)
{
    return (oc + 15) / 16;
}

/* Tiles of a Winograd block for c: a multiple of 6, its V about 1.5 MB (the L2 of the larger
 * cores, half the L3 slice of the smaller), between 12 and 240. */
static inline int vfk_wino_tiles(const vfk_conv *c)
{
    size_t per_tile = 36 * (size_t)vfk_padded(c->ic) * sizeof(float);
    size_t t = ((size_t)3 << 19) / per_tile / 6 * 6;
    return t < 12 ? 12 : t > 240 ? 240 : (int)t;
}

#endif /* VIDFEAT_KERNELS_LAYOUT_H */
