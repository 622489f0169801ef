/*
 * A split reduction's step (tessera.codegen.split), shared by the kernel
 * libraries: the walk over a pixel's output channels, 4 at a time, and its
 * window's taps, with the library's own dot product `mac` (constant at
 * each call: the compiler inlines it). tsr_split_args_t: tessera/kernels.h.
 *
 * conv.in is the chunk's input box [in_h][in_w][kc], weights
 * [out_c][kh][kw][kc]; a linear layer's kh, kw are the input's h, w
 * (weights [out_c][in_h][in_w][kc], the input's order: one run of
 * in_h * in_w * kc). Padded taps are skipped (their (x + off) is 0 in the
 * unsplit kernels). The first chunk starts from the bias, the last
 * requantizes into conv.out; the others keep the int32 sums in acc.
 */
#ifndef TESSERA_SPLIT_H
#define TESSERA_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/kernels.h"

/* acc[0..m) += the run of n inputs (plus off) times m channels' weights,
 * whose rows are `block` apart (m <= 4) */
typedef void (*tsr_split_mac_t)(int32_t *acc, int32_t m, const int8_t *x, const int8_t *w0, int32_t block,
                                int32_t n, int32_t off);

/* The plain part of a library's mac: acc[0..m) += inputs [k, n) of the
 * run (plus off) times the m channels' weights. */
static inline void tsr_split_mac_from(int32_t *acc, int32_t m, const int8_t *x, const int8_t *w0, int32_t block,
                                      int32_t k, int32_t n, int32_t off)
{
    int32_t q, i;
    for (q = 0; q < m; q++) {
        const int8_t *w = w0 + (size_t)q * block;
        int32_t a = acc[q];
        for (i = k; i < n; i++)
            a += (x[i] + off) * w[i];
        acc[q] = a;
    }
}

/* The same for m == 4 with the sums in registers: acc[0..4) += inputs
 * [k, n) of the run (plus off) times 4 channels' weights (one input load
 * shared by the 4 channels; the libraries' SIMD loops leave their tail here). */
static inline void tsr_split_mac4_from(int32_t *acc, const int8_t *x, const int8_t *w0, int32_t block, int32_t k,
                                       int32_t n, int32_t off)
{
    const int8_t *w1 = w0 + block, *w2 = w1 + block, *w3 = w2 + block;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    for (; k < n; k++) {
        const int32_t v = x[k] + off;
        a0 += v * w0[k];
        a1 += v * w1[k];
        a2 += v * w2[k];
        a3 += v * w3[k];
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* always inlined: `mac` is then a constant the compiler inlines too */
#define TSR_SPLIT_INLINE static inline __attribute__((always_inline))

TSR_SPLIT_INLINE void tsr_split_pixel(const tsr_split_args_t *s, int32_t p, int32_t c0, int32_t c1,
                              tsr_split_mac_t mac)
{
    const tsr_conv_args_t *a = s->conv;
    const int32_t kc = a->in_c, off = a->input_offset, block = a->kh * a->kw * kc;
    const int32_t dh = a->dh > 1 ? a->dh : 1, dw = a->dw > 1 ? a->dw : 1;
    const int32_t oy = p / a->out_w, ox = p % a->out_w;
    const int whole = a->kh == a->in_h && a->kw == a->in_w && a->out_h == 1 && a->out_w == 1 &&
                      !(a->pad_t | a->pad_l | a->pad_b | a->pad_r);
    const size_t o = (size_t)p * a->out_c;
    int32_t c, j, ky, kx, acc[4];
    for (c = c0; c < c1; c += 4) {
        const int32_t m = c1 - c < 4 ? c1 - c : 4;
        const int8_t *w = a->weights + (size_t)c * block;
        for (j = 0; j < m; j++)
            acc[j] = s->first ? (a->bias ? a->bias[c + j] : 0) : s->acc[o + c + j];
        if (whole) {
            mac(acc, m, a->in, w, block, block, off);
        } else {
            for (ky = 0; ky < a->kh; ky++) {
                const int32_t iy = oy * a->sh - a->pad_t + ky * dh;
                if (iy < 0 || iy >= a->in_h)
                    continue;
                for (kx = 0; kx < a->kw; kx++) {
                    const int32_t ix = ox * a->sw - a->pad_l + kx * dw;
                    if (ix < 0 || ix >= a->in_w)
                        continue;
                    mac(acc, m, a->in + ((size_t)iy * a->in_w + ix) * kc, w + (ky * a->kw + kx) * kc, block, kc,
                        off);
                }
            }
        }
        for (j = 0; j < m; j++) {
            if (!s->last)
                s->acc[o + c + j] = acc[j];
            else if (a->rq)
                ((int8_t *)a->out)[o + c + j] = (int8_t)tsr_requantize(acc[j], a->rq, c + j);
            else
                ((int32_t *)a->out)[o + c + j] = acc[j];
        }
    }
}

/* The step on `core` of `ncores`: a share of the tile's pixels, or of its
 * channels (in multiples of `quantum`) when it has one pixel. */
TSR_SPLIT_INLINE void tsr_split_share(const tsr_split_args_t *s, int core, int ncores, int32_t quantum,
                                   tsr_split_mac_t mac)
{
    const tsr_conv_args_t *a = s->conv;
    const int32_t pixels = a->out_h * a->out_w, n = pixels == 1 ? a->out_c : pixels;
    int64_t per, b, e;
    int32_t p;
    if (ncores < 1)
        ncores = 1;
    per = ((int64_t)n + ncores - 1) / ncores;
    if (pixels == 1)
        per = (per + quantum - 1) / quantum * quantum;
    b = per * core;
    e = b + per;
    if (b > n)
        b = n;
    if (e > n)
        e = n;
    if (pixels == 1) {
        if (b < e)
            tsr_split_pixel(s, 0, (int32_t)b, (int32_t)e, mac);
        return;
    }
    for (p = (int32_t)b; p < (int32_t)e; p++)
        tsr_split_pixel(s, p, 0, a->out_c, mac);
}

#endif /* TESSERA_SPLIT_H */
