/*
 * Reference pointwise -> depthwise fused kernel, channel-wise (see kernels.h).
 *
 * The arithmetic is exactly the two layers' (the pointwise stores its int8
 * output through its requantization, the depthwise reads it with its input
 * offset); only the intermediate lives in a small per-core L1 buffer of fd
 * channels over the whole tile instead of an L2 tensor. A depthwise output
 * channel needs only the same pointwise channel, so a block of channels is
 * complete on its own: no halo between blocks, no barrier between cores
 * (each core reads only the channels it wrote).
 */
#include "ref_common.h"

/* Pointwise output channels [c0, c0 + n) of every pixel into buf ([pixel][n]). */
static void pw_channels(const tsr_conv_args_t *a, int32_t c0, int32_t n, int8_t *buf)
{
    const int32_t in_c = a->in_c, off = a->input_offset;
    const int32_t pixels = a->in_h * a->in_w;
    int32_t p, j, k;

    for (p = 0; p < pixels; p++) {
        const int8_t *x = a->in + (size_t)p * in_c;
        for (j = 0; j < n; j++) {
            const int8_t *w = a->weights + (size_t)(c0 + j) * in_c;
            int32_t acc = a->bias ? a->bias[c0 + j] : 0;
            for (k = 0; k < in_c; k++)
                acc += (x[k] + off) * w[k];
            buf[(size_t)p * n + j] = (int8_t)tsr_requantize(acc, a->rq, c0 + j);
        }
    }
}

/* Depthwise of channels [c0, c0 + n), read from buf ([in_h][in_w][n]). */
static void dw_channels(const tsr_conv_args_t *a, int32_t c0, int32_t n, const int8_t *buf)
{
    const int32_t C = a->out_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    int32_t oy, ox, j, ky, kx;

    for (oy = 0; oy < a->out_h; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            int8_t *o = (int8_t *)a->out + ((size_t)oy * a->out_w + ox) * C + c0;
            tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
            for (j = 0; j < n; j++) {
                const int8_t *w = a->weights + (size_t)(c0 + j) * kh * kw;
                int32_t acc = a->bias ? a->bias[c0 + j] : 0;
                for (ky = ky0; ky < ky1; ky++)
                    for (kx = kx0; kx < kx1; kx++)
                        acc += (buf[((size_t)(iy0 + ky) * a->in_w + (ix0 + kx)) * n + j] + off)
                               * w[ky * kw + kx];
                o[j] = (int8_t)tsr_requantize(acc, a->rq, c0 + j);
            }
        }
    }
}

void tsr_pw_dw(const tsr_pw_dw_args_t *a, int core, int ncores)
{
    const int32_t fd = a->fd > 0 ? a->fd : 1;
    int8_t *buf = a->buf + (size_t)core * fd * a->pw.in_h * a->pw.in_w;
    int32_t c0, c1, c, n;

    tsr_ref_share(a->dw.out_c, core, ncores, &c0, &c1);
    for (c = c0; c < c1; c += n) {
        n = c1 - c < fd ? c1 - c : fd;
        pw_channels(&a->pw, c, n, buf);
        dw_channels(&a->dw, c, n, buf);
    }
}
