/*
 * Dilated conv2d (TCN blocks, ASPP) on the Cortex-M cores. Written for
 * tessera. The reference kernel (conv_dilated in reference/conv.c) sums
 * every tap with a bounds test per tap and output channel. Here each output
 * pixel's dilated window is gathered once into an int8 column (padded taps
 * written as -input_offset, so they add 0), widened to int16 pairs with the
 * offset added (sxtb16 + sadd16, in the "reordered" order of tsr_dsp.h), and
 * every pair of output channels is two smlad per four taps against the
 * filter's words; the requantization is tsr_requantize's (any form). Tiles
 * with a weight offset, an int32 output, parameters per element, an input
 * offset outside [-127, 128] or less scratch than 3 rounded columns (the
 * conv2d entry of library.yaml reserves 4 * patch + 12 bytes) run on
 * tsr_conv2d.
 */
#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_dsp.h"

/* output pixel (oy, ox)'s window: taps dh rows and dw columns apart */
static void gather(const tsr_conv_args_t *a, int32_t oy, int32_t ox, int8_t *col, int8_t pad)
{
    const int32_t C = a->in_c, dh = a->dh > 1 ? a->dh : 1, dw = a->dw > 1 ? a->dw : 1;
    const int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l;
    for (int32_t ky = 0; ky < a->kh; ky++) {
        const int32_t iy = iy0 + ky * dh;
        for (int32_t kx = 0; kx < a->kw; kx++, col += C) {
            const int32_t ix = ix0 + kx * dw;
            int32_t c = 0;
            if (iy < 0 || iy >= a->in_h || ix < 0 || ix >= a->in_w) {
                for (; c < C; c++)
                    col[c] = pad;
                continue;
            }
            const int8_t *x = a->in + ((size_t)iy * a->in_w + ix) * C;
            for (; c + 4 <= C; c += 4)
                tsr_st32(col + c, tsr_ld32(x + c));
            for (; c < C; c++)
                col[c] = x[c];
        }
    }
}

/* n (a multiple of 4) int8 values to int16 pairs (v0, v2), (v1, v3) plus the offset */
static void widen(const int8_t *col, int32_t *w16, int32_t n, int32_t off2)
{
    for (int32_t k = 0; k < n; k += 4, w16 += 2) {
        const uint32_t w = tsr_ld32(col + k);
        w16[0] = tsr_sadd16(tsr_sxtb16(w), off2);
        w16[1] = tsr_sadd16(tsr_sxtb16_ror8(w), off2);
    }
}

TSR_INLINE int32_t dot4(const int32_t *w16, const int8_t *w, int32_t groups, int32_t acc)
{
    for (int32_t g = 0; g < groups; g++, w += 4, w16 += 2) {
        const uint32_t f = tsr_ld32(w);
        acc = tsr_smlad(tsr_sxtb16(f), w16[0], acc);
        acc = tsr_smlad(tsr_sxtb16_ror8(f), w16[1], acc);
    }
    return acc;
}

/* two filters against one column: each column word loaded once */
TSR_INLINE void dot4x2(const int32_t *w16, const int8_t *f0, const int8_t *f1, int32_t groups, int32_t *acc0,
                       int32_t *acc1)
{
    int32_t s0 = *acc0, s1 = *acc1;
    for (int32_t g = 0; g < groups; g++, f0 += 4, f1 += 4, w16 += 2) {
        const int32_t c02 = w16[0], c13 = w16[1];
        const uint32_t a = tsr_ld32(f0), b = tsr_ld32(f1);
        s0 = tsr_smlad(tsr_sxtb16(a), c02, s0);
        s0 = tsr_smlad(tsr_sxtb16_ror8(a), c13, s0);
        s1 = tsr_smlad(tsr_sxtb16(b), c02, s1);
        s1 = tsr_smlad(tsr_sxtb16_ror8(b), c13, s1);
    }
    *acc0 = s0, *acc1 = s1;
}

void tsr_cmsis_conv2d_dilated(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const int32_t patch = a->kh * a->kw * a->in_c, off = a->input_offset;
    const int32_t p8 = (patch + 3) & ~3;
    if (!a->rq || a->weight_offset || a->bias_elem.plane || a->rq->elem.plane || off < -127 || off > 128
        || !a->scratch || a->scratch_bytes < 3 * p8 + 4) {
        tsr_conv2d(a, 0, 1);
        return;
    }
    /* the int16 pairs word-aligned after the int8 column */
    int8_t *col = a->scratch;
    int32_t *w16 = (int32_t *)(((uintptr_t)(col + p8) + 3) & ~(uintptr_t)3);
    const int32_t off2 = (int32_t)(((uint32_t)(uint16_t)off) | ((uint32_t)(uint16_t)off << 16));
    const int32_t groups = patch >> 2, tail = groups << 2;
    int8_t *out = a->out;
    for (int32_t oy = 0; oy < a->out_h; oy++) {
        for (int32_t ox = 0; ox < a->out_w; ox++, out += a->out_c) {
            gather(a, oy, ox, col, (int8_t)-off);
            widen(col, w16, tail, off2);
            int32_t co = 0;
            for (; co + 2 <= a->out_c; co += 2) {
                const int8_t *f0 = a->weights + (size_t)co * patch, *f1 = f0 + patch;
                int32_t acc0 = a->bias ? a->bias[co] : 0, acc1 = a->bias ? a->bias[co + 1] : 0;
                dot4x2(w16, f0, f1, groups, &acc0, &acc1);
                for (int32_t k = tail; k < patch; k++) {
                    acc0 += (col[k] + off) * f0[k];
                    acc1 += (col[k] + off) * f1[k];
                }
                out[co] = (int8_t)tsr_requantize(acc0, a->rq, co);
                out[co + 1] = (int8_t)tsr_requantize(acc1, a->rq, co + 1);
            }
            for (; co < a->out_c; co++) {
                const int8_t *f0 = a->weights + (size_t)co * patch;
                int32_t acc0 = dot4(w16, f0, groups, a->bias ? a->bias[co] : 0);
                for (int32_t k = tail; k < patch; k++)
                    acc0 += (col[k] + off) * f0[k];
                out[co] = (int8_t)tsr_requantize(acc0, a->rq, co);
            }
        }
    }
}
