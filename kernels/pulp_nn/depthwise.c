/*
 * depthwise conv, DORY's hybrid scheme: the input tile arrives in L1 in CHW
 * order [c][in_h][in_w] (the layer's loader gathers it from the HWC tensor
 * with strided DMA, tsr_tile_in_chw), weights [c][kh][kw], output HWC.
 *
 * Work split: channels per core (a channel's plane is contiguous in CHW).
 * For each channel and output column the core copies the kw-wide vertical
 * stripe of the input the column's windows read, top to bottom with its
 * padding, into its own scratch (the "vertical im2col"): every window of
 * that column is then kh * kw contiguous bytes, in the weights' [kh][kw]
 * order, and an output is one dot product of that length. Scratch per core:
 * (in_h + pad_t + pad_b) * kw bytes. Padding is stored as -input_offset (see
 * pnn_offset_padable); without the scratch, or with an offset that cannot
 * be stored, a direct loop computes the same values.
 */
#include <string.h>

#include "pnn_common.h"
#include "tessera/pulp_nn.h"

static void depthwise_direct(const tsr_conv_args_t *a, int32_t c0, int32_t c1)
{
    const int32_t C = a->out_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    int32_t c, oy, ox, ky, kx;
    pnn_rq_t rq = {0, 0, 0, 0, 0, 0};
    for (c = c0; c < c1; c++) {
        const int8_t *plane = a->in + (size_t)c * a->in_h * a->in_w;
        const int8_t *w = a->weights + (size_t)c * kh * kw;
        if (a->rq)
            rq = pnn_rq_channel(a->rq, c);
        for (oy = 0; oy < a->out_h; oy++) {
            int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
            tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
            for (ox = 0; ox < a->out_w; ox++) {
                int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
                int32_t acc = a->bias ? a->bias[c] : 0;
                tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
                for (ky = ky0; ky < ky1; ky++)
                    for (kx = kx0; kx < kx1; kx++)
                        PNN_MAC(acc, plane[(size_t)(iy0 + ky) * a->in_w + ix0 + kx] + off,
                                w[ky * kw + kx]);
                pnn_store(a->out, ((size_t)oy * a->out_w + ox) * C + c, acc, &rq, a->rq);
            }
        }
    }
}

/* The kw-wide stripe of plane for output column ox: rows [0, rows) of the
 * padded input, each kw bytes, padding as pad_value. */
static void stripe(const tsr_conv_args_t *a, const int8_t *plane, int32_t ox, int32_t rows,
                   int8_t *s, int8_t pad_value)
{
    const int32_t kw = a->kw, ix0 = ox * a->sw - a->pad_l;
    int32_t kx0, kx1, y, k;
    tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
    for (y = 0; y < rows; y++, s += kw) {
        int32_t iy = y - a->pad_t;
        const int8_t *src = plane + (size_t)iy * a->in_w + ix0;
        if (iy < 0 || iy >= a->in_h) {
            for (k = 0; k < kw; k++)
                s[k] = pad_value;
            continue;
        }
        for (k = 0; k < kx0; k++)
            s[k] = pad_value;
        for (; k < kx1; k++)
            s[k] = src[k];
        for (; k < kw; k++)
            s[k] = pad_value;
    }
}

void pnn_depthwise(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t C = a->out_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    const int32_t area = kh * kw, step = a->sh * kw;
    const int32_t rows = (a->out_h - 1) * a->sh + kh;   /* padded input rows the windows read */
    int32_t c0, c1, c, ox, oy, i;
    int8_t *s;

    pnn_chunk(C, 1, core, ncores, &c0, &c1);
    if (c0 >= c1)
        return;
    if (!a->scratch || a->scratch_bytes < rows * kw || !pnn_offset_padable(off)) {
        depthwise_direct(a, c0, c1);
        return;
    }
    s = a->scratch + (size_t)core * (size_t)a->scratch_bytes;
    for (c = c0; c < c1; c++) {
        const int8_t *plane = a->in + (size_t)c * a->in_h * a->in_w;
        const int8_t *w = a->weights + (size_t)c * area;
        const int32_t b = a->bias ? a->bias[c] : 0;
        pnn_rq_t rq = {0, 0, 0, 0, 0, 0};
        if (a->rq)
            rq = pnn_rq_channel(a->rq, c);
        for (ox = 0; ox < a->out_w; ox++) {
            const int8_t *win = s;
            size_t o = (size_t)ox * C + c;
            stripe(a, plane, ox, rows, s, (int8_t)-off);
            if (area == 9) {
                /* 3x3, the common case: the weights stay in registers and
                 * the offset's share, off * sum(w), joins the bias (padding
                 * holds -off, so it still adds nothing) */
                const int32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5];
                const int32_t w6 = w[6], w7 = w[7], w8 = w[8];
                const int32_t b_off = b + off * (w0 + w1 + w2 + w3 + w4 + w5 + w6 + w7 + w8);
                for (oy = 0; oy < a->out_h; oy++, win += step, o += (size_t)a->out_w * C) {
                    int32_t acc = b_off;
                    PNN_MAC(acc, win[0], w0); PNN_MAC(acc, win[1], w1); PNN_MAC(acc, win[2], w2);
                    PNN_MAC(acc, win[3], w3); PNN_MAC(acc, win[4], w4); PNN_MAC(acc, win[5], w5);
                    PNN_MAC(acc, win[6], w6); PNN_MAC(acc, win[7], w7); PNN_MAC(acc, win[8], w8);
                    pnn_store(a->out, o, acc, &rq, a->rq);
                }
                continue;
            }
            for (oy = 0; oy < a->out_h; oy++, win += step, o += (size_t)a->out_w * C) {
                int32_t acc = b;
                for (i = 0; i < area; i++)
                    PNN_MAC(acc, win[i] + off, w[i]);
                pnn_store(a->out, o, acc, &rq, a->rq);
            }
        }
    }
}
