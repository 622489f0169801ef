/*
 * Reference depthwise -> pointwise fused kernel, row-wise (see kernels.h).
 *
 * The arithmetic is exactly the two layers' (the depthwise stores its int8
 * output through its requantization, the pointwise reads it with its input
 * offset), only the intermediate lives in a small per-core L1 buffer of fd
 * rows instead of an L2 tensor. A per-core buffer needs no barrier between
 * the depthwise and the pointwise: each core reads only the rows it wrote.
 * Per-element parameters and dilation are not fused (the fusion engine
 * leaves such pairs apart).
 */
#include "ref_common.h"

/* Depthwise output rows [y0, y0 + n) of the tile, all channels, into buf
 * (HWC, row y0 first). */
static void dw_rows(const tsr_conv_args_t *a, int32_t y0, int32_t n, int8_t *buf)
{
    const int32_t C = a->out_c, in_c = a->in_c, kh = a->kh, kw = a->kw;
    const int32_t off = a->input_offset;
    const size_t row_stride = (size_t)a->in_w * in_c;
    int32_t oy, ox, c, ky, kx;

    for (oy = y0; oy < y0 + n; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            int8_t *o = buf + ((size_t)(oy - y0) * a->out_w + ox) * C;
            const int8_t *base = a->in;
            tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
            if (ky0 < ky1 && kx0 < kx1)
                base += ((size_t)(iy0 + ky0) * a->in_w + (size_t)(ix0 + kx0)) * in_c;
            for (c = 0; c < C; c++) {
                const int8_t *w = a->weights + (size_t)c * kh * kw;
                const int8_t *x = base + c;
                int32_t acc = a->bias ? a->bias[c] : 0;
                for (ky = ky0; ky < ky1; ky++, x += row_stride) {
                    const int8_t *xr = x, *wr = w + (size_t)ky * kw;
                    for (kx = kx0; kx < kx1; kx++, xr += in_c)
                        acc += (*xr + off) * wr[kx];
                }
                o[c] = (int8_t)tsr_requantize(acc, a->rq, c);
            }
        }
    }
}

void tsr_dw_pw(const tsr_dw_pw_args_t *a, int core, int ncores)
{
    const tsr_conv_args_t *dw = &a->dw, *pw = &a->pw;
    const int32_t C = dw->out_c, Wo = dw->out_w, Co = pw->out_c;
    const int32_t fd = a->fd > 0 ? a->fd : 1;
    int8_t *buf = a->buf + (size_t)core * fd * Wo * C;
    int32_t r0, r1, y, p, n;

    tsr_ref_share(dw->out_h, core, ncores, &r0, &r1);
    for (y = r0; y < r1; y += n) {
        const size_t o = (size_t)y * Wo * Co;   /* the block's first output element */
        n = r1 - y < fd ? r1 - y : fd;
        dw_rows(dw, y, n, buf);
        for (p = 0; p + 1 < n * Wo; p += 2)
            tsr_ref_matmul(buf + (size_t)p * C, buf + (size_t)(p + 1) * C, C, pw->weights, pw->bias, 0, Co,
                           pw->input_offset, pw->out, o + (size_t)p * Co, o + (size_t)(p + 1) * Co, pw->rq);
        if (p < n * Wo)
            tsr_ref_matmul(buf + (size_t)p * C, NULL, C, pw->weights, pw->bias, 0, Co,
                           pw->input_offset, pw->out, o + (size_t)p * Co, 0, pw->rq);
    }
}
