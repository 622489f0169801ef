/*
 * Window helpers shared by the kernel libraries: which part of a kernel
 * window lies inside the input tile, and one output pixel's receptive field
 * unrolled for an im2col matmul.
 */
#ifndef TESSERA_WINDOW_H
#define TESSERA_WINDOW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tessera/kernels.h"

/* The valid part [k0, k1) of a window of size k whose first position is at
 * input coordinate `start` of an axis of n_in (negative or past the end:
 * padding). */
static inline void tsr_window(int32_t start, int32_t k, int32_t n_in, int32_t *k0, int32_t *k1)
{
    int32_t a = start < 0 ? -start : 0;
    int32_t b = n_in - start < k ? n_in - start : k;
    if (b < a)
        b = a;
    *k0 = a;
    *k1 = b;
}

/* Output pixel (oy, ox)'s receptive field into col, in the weights'
 * [kh][kw][in_c] order; padded positions hold pad_value. */
static inline void tsr_im2col_pixel(const tsr_conv_args_t *a, int32_t oy, int32_t ox, int8_t *col,
                                    int8_t pad_value)
{
    const int32_t in_c = a->in_c, kw = a->kw;
    const size_t row_bytes = (size_t)kw * in_c;
    int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l;
    int32_t kx0, kx1, ky;
    tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
    for (ky = 0; ky < a->kh; ky++, col += row_bytes) {
        int32_t iy = iy0 + ky;
        if (iy < 0 || iy >= a->in_h || kx0 >= kx1) {
            memset(col, pad_value, row_bytes);
            continue;
        }
        /* the valid columns of a window row are one contiguous run in HWC */
        if (kx0 > 0)
            memset(col, pad_value, (size_t)kx0 * in_c);
        memcpy(col + (size_t)kx0 * in_c, a->in + ((size_t)iy * a->in_w + (ix0 + kx0)) * in_c,
               (size_t)(kx1 - kx0) * in_c);
        if (kx1 < kw)
            memset(col + (size_t)kx1 * in_c, pad_value, (size_t)(kw - kx1) * in_c);
    }
}

#endif /* TESSERA_WINDOW_H */
