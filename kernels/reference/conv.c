/*
 * Reference conv2d: HWC input tile, weights [out_c][kh][kw][in_c].
 *
 * Each core computes output rows [core * ceil(out_h / ncores), ...). With
 * enough scratch the receptive fields of two output pixels are unrolled into
 * the core's im2col buffer (padding written as -input_offset, so that
 * x + input_offset is 0 there and the matmul needs no bounds checks); without
 * it, or with parameters per output element or a weight offset, a direct loop skips the padded
 * positions.
 */
#include <string.h>

#include "ref_common.h"

/* No scratch (or parameters per element): sum over the valid part of each
 * window directly. */
static void conv_direct(const tsr_conv_args_t *a, int32_t r0, int32_t r1)
{
    const int32_t in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset, woff = a->weight_offset;
    int32_t oy, ox, co, ky, kx, ci;
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            size_t o = ((size_t)oy * a->out_w + ox) * a->out_c;
            tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
            for (co = 0; co < a->out_c; co++) {
                int32_t acc = tsr_ref_bias(a, oy, ox, co);
                for (ky = ky0; ky < ky1; ky++) {
                    for (kx = kx0; kx < kx1; kx++) {
                        const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (ix0 + kx)) * in_c;
                        const int8_t *w = a->weights + (((size_t)co * kh + ky) * kw + kx) * in_c;
                        for (ci = 0; ci < in_c; ci++)
                            acc += (x[ci] + off) * (w[ci] + woff);
                    }
                }
                tsr_ref_store_at(a->out, o + co, acc, a->rq, oy, ox, co);
            }
        }
    }
}

/* Dilated windows: taps dh rows and dw columns apart, padded taps skipped. */
static void conv_dilated(const tsr_conv_args_t *a, int32_t r0, int32_t r1)
{
    const int32_t in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset, woff = a->weight_offset;
    const int32_t dh = a->dh > 1 ? a->dh : 1, dw = a->dw > 1 ? a->dw : 1;
    int32_t oy, ox, co, ky, kx, ci;
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t;
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l;
            size_t o = ((size_t)oy * a->out_w + ox) * a->out_c;
            for (co = 0; co < a->out_c; co++) {
                int32_t acc = tsr_ref_bias(a, oy, ox, co);
                for (ky = 0; ky < kh; ky++) {
                    int32_t iy = iy0 + ky * dh;
                    if (iy < 0 || iy >= a->in_h)
                        continue;
                    for (kx = 0; kx < kw; kx++) {
                        int32_t ix = ix0 + kx * dw;
                        const int8_t *x, *w;
                        if (ix < 0 || ix >= a->in_w)
                            continue;
                        x = a->in + ((size_t)iy * a->in_w + ix) * in_c;
                        w = a->weights + (((size_t)co * kh + ky) * kw + kx) * in_c;
                        for (ci = 0; ci < in_c; ci++)
                            acc += (x[ci] + off) * (w[ci] + woff);
                    }
                }
                tsr_ref_store_at(a->out, o + co, acc, a->rq, oy, ox, co);
            }
        }
    }
}

void tsr_conv2d(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t patch = a->kh * a->kw * a->in_c;
    const int32_t off = a->input_offset;
    int32_t r0, r1, p, p_end;
    int8_t *col0, *col1;

    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    if (r0 >= r1)
        return;
    if (a->dh > 1 || a->dw > 1) {
        conv_dilated(a, r0, r1);
        return;
    }
    /* The im2col path stores padding as int8 -off: off must be in [-127, 128]
     * (it is -zero_point of an int8 or shifted uint8 tensor). */
    if (!a->scratch || a->scratch_bytes < 2 * patch || off < -127 || off > 128 || tsr_ref_per_element(a)
        || a->weight_offset) {
        conv_direct(a, r0, r1);
        return;
    }
    col0 = a->scratch + (size_t)core * (size_t)a->scratch_bytes;
    col1 = col0 + patch;
    /* pixels of this core's rows in raster order, two at a time (a pair may
     * straddle two rows) */
    p = r0 * a->out_w;
    p_end = r1 * a->out_w;
    for (; p + 1 < p_end; p += 2) {
        tsr_im2col_pixel(a, p / a->out_w, p % a->out_w, col0, (int8_t)-off);
        tsr_im2col_pixel(a, (p + 1) / a->out_w, (p + 1) % a->out_w, col1, (int8_t)-off);
        tsr_ref_matmul(col0, col1, patch, a->weights, a->bias, 0, a->out_c, off,
                       a->out, (size_t)p * a->out_c, (size_t)(p + 1) * a->out_c, a->rq);
    }
    if (p < p_end) {
        tsr_im2col_pixel(a, p / a->out_w, p % a->out_w, col0, (int8_t)-off);
        tsr_ref_matmul(col0, NULL, patch, a->weights, a->bias, 0, a->out_c, off,
                       a->out, (size_t)p * a->out_c, 0, a->rq);
    }
}
