/*
 * Reference depthwise conv: HWC input tile, weights [c][kh][kw] (channel
 * major, so a channel tile of the weights is contiguous), out_c == in_c.
 * Each core computes output rows [core * ceil(out_h / ncores), ...).
 *
 * Padding is skipped: the valid part of each window is computed once per
 * output pixel, so the innermost loops have no bounds checks.
 */
#include "ref_common.h"

/* Dilated windows: taps dh rows and dw columns apart, padded taps skipped. */
static void depthwise_dilated(const tsr_conv_args_t *a, int32_t r0, int32_t r1)
{
    const int32_t C = a->out_c, in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    const int32_t woff = a->weight_offset;
    const int32_t dh = a->dh > 1 ? a->dh : 1, dw = a->dw > 1 ? a->dw : 1;
    int32_t oy, ox, c, ky, kx;
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t;
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l;
            size_t o = ((size_t)oy * a->out_w + ox) * C;
            for (c = 0; c < C; c++) {
                const int8_t *w = a->weights + (size_t)c * kh * kw;
                int32_t acc = tsr_ref_bias(a, oy, ox, c);
                for (ky = 0; ky < kh; ky++) {
                    int32_t iy = iy0 + ky * dh;
                    if (iy < 0 || iy >= a->in_h)
                        continue;
                    for (kx = 0; kx < kw; kx++) {
                        int32_t ix = ix0 + kx * dw;
                        if (ix < 0 || ix >= a->in_w)
                            continue;
                        acc += (a->in[((size_t)iy * a->in_w + ix) * in_c + c] + off) * (w[ky * kw + kx] + woff);
                    }
                }
                tsr_ref_store_at(a->out, o + c, acc, a->rq, oy, ox, c);
            }
        }
    }
}

void tsr_depthwise(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t C = a->out_c, in_c = a->in_c, kh = a->kh, kw = a->kw;
    const int32_t off = a->input_offset, woff = a->weight_offset;
    const size_t row_stride = (size_t)a->in_w * in_c;
    int32_t r0, r1, oy, ox, c, ky, kx;

    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    if (a->dh > 1 || a->dw > 1) {
        depthwise_dilated(a, r0, r1);
        return;
    }
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            size_t o = ((size_t)oy * a->out_w + ox) * C;
            /* channel 0 of the valid window's top-left input pixel (a window
             * entirely in padding reads nothing) */
            const int8_t *base = a->in;
            tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
            if (ky0 < ky1 && kx0 < kx1)
                base += ((size_t)(iy0 + ky0) * a->in_w + (size_t)(ix0 + kx0)) * in_c;
            for (c = 0; c < C; c++) {
                const int8_t *w = a->weights + (size_t)c * kh * kw;
                const int8_t *x = base + c;
                int32_t acc = tsr_ref_bias(a, oy, ox, c);
                for (ky = ky0; ky < ky1; ky++, x += row_stride) {
                    const int8_t *xr = x, *wr = w + (size_t)ky * kw;
                    for (kx = kx0; kx < kx1; kx++, xr += in_c)
                        acc += (*xr + off) * (wr[kx] + woff);
                }
                tsr_ref_store_at(a->out, o + c, acc, a->rq, oy, ox, c);
            }
        }
    }
}
