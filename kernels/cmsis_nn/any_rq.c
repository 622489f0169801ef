/*
 * Convolutions, depthwise, pointwise and fully connected layers with
 * tessera's whole requantization (floor rounding, an additive term,
 * Requant.divisor, int32 outputs), which CMSIS-NN's API cannot express (its
 * requantization rounds half up and has no additive term): the layers of
 * NEMO/DORY and Deeploy graphs. An int8 output runs on the library's cores
 * (mm.c, dw.c) in the DORY form (TSR_RQ_K64; what does not fit it, e.g.
 * Requant.divisor, per element there); int32 outputs, and calls without
 * room for the cores' buffers, on the code below. Written for tessera,
 * outside arm/, so that they stay when ARM's CMSIS-NN replaces arm/.
 *
 * Below: pointwise and fully connected layers read their inputs in place: four
 * bytes of input and of a filter row make two smlad (sxtab16 adds the
 * input offset while sign-extending bytes 0 and 2, its ror8 form bytes 1
 * and 3; the filter goes through sxtb16 the same way, so lanes pair up).
 * A convolution first unrolls two output pixels' windows into int16
 * columns in the scratch (x + input_offset, 0 in the padding, in that lane
 * order) where that pays (see tsr_cmsis_conv2d_rq), so that a filter word
 * then costs a load, two sxtb16 and two smlad; otherwise, or without the
 * scratch (2 bytes per filter element), it reads each window row in place
 * as above. Two output channels share each column or
 * input word.
 *
 * A weight offset (TF1-style asymmetric uint8 weights: acc = bias +
 * sum (x + off) * (w + weight_offset)) is the same arithmetic plus
 * weight_offset times the window's sum (x + off), which every output
 * channel of the window shares: summed once per window (sum_off, or the
 * column's as it is built); the depthwise takes w + weight_offset in its
 * int16 lanes.
 *
 * Only core 0 computes: Cortex-M targets have one core.
 */
#include <stddef.h>
#include <stdint.h>

#include "tessera/cmsis_nn.h"
#include "tessera/window.h"
#include "tsr_dsp.h"
#include "tsr_glue.h"

/* DORY's and Deeploy's requantization (floor or half up, an additive
 * term), an int8 output: the library's cores (TSR_RQ_K64; what does not fit
 * its fast form, e.g. Requant.divisor, per element there). Otherwise, or
 * without room for the cores' buffers, the code below; so also a weight
 * offset, a negative accumulator's own multiplier (a LeakyRelu folded) and
 * an additive term in units of 2^add_shift (a bias wider than 32 bits),
 * which the cores do not take. */
static int k64(const tsr_conv_args_t *a)
{
    return a->rq && (a->rq->rounding == TSR_ROUND_HALF_UP || a->rq->rounding == TSR_ROUND_FLOOR) &&
           !a->rq->elem.plane && !a->bias_elem.plane && a->dh <= 1 && a->dw <= 1 && !a->weight_offset &&
           !a->rq->neg_mul && !a->rq->add_shift;
}

/* s0 += sum (x[i] + off) * w0[i], s1 the same with w1, over n elements */
TSR_INLINE void dot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t off,
                     int32_t *s0, int32_t *s1)
{
    const int32_t off2 = tsr_dup16(off);
    int32_t a0 = *s0, a1 = *s1, i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t xv = tsr_ld32(x + i), v0 = tsr_ld32(w0 + i), v1 = tsr_ld32(w1 + i);
        const int32_t xa = tsr_sxtab16(off2, xv), xb = tsr_sxtab16_ror8(off2, xv);
        a0 = tsr_smlad(tsr_sxtb16(v0), xa, a0);
        a0 = tsr_smlad(tsr_sxtb16_ror8(v0), xb, a0);
        a1 = tsr_smlad(tsr_sxtb16(v1), xa, a1);
        a1 = tsr_smlad(tsr_sxtb16_ror8(v1), xb, a1);
    }
    for (; i < n; i++) {
        a0 += (x[i] + off) * w0[i];
        a1 += (x[i] + off) * w1[i];
    }
    *s0 = a0;
    *s1 = a1;
}

/* sum (x[i] + off) over n elements (the weight offset's factor) */
static int32_t sum_off(const int8_t *x, int32_t n, int32_t off)
{
    int32_t s = n * off, i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t xv = tsr_ld32(x + i);
        s = tsr_smlad(tsr_sxtb16(xv), 0x00010001, s);
        s = tsr_smlad(tsr_sxtb16_ror8(xv), 0x00010001, s);
    }
    for (; i < n; i++)
        s += x[i];
    return s;
}

TSR_INLINE void store(const tsr_conv_args_t *a, size_t o, int32_t c, int32_t acc)
{
    if (a->rq)
        ((int8_t *)a->out)[o + c] = (int8_t)tsr_requantize(acc, a->rq, c);
    else
        ((int32_t *)a->out)[o + c] = acc;
}

TSR_INLINE int32_t bias(const tsr_conv_args_t *a, int32_t c)
{
    return a->bias ? a->bias[c] : 0;
}

/* s0 += sum col[k] * w0[k], s1 the same with w1; col: int16 in the lane
 * order of col_index, n elements */
TSR_INLINE void dot2_col(const int32_t *col, const int8_t *w0, const int8_t *w1, int32_t n,
                         int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1, i = 0;
    for (; i + 4 <= n; i += 4, col += 2) {
        const uint32_t v0 = tsr_ld32(w0 + i), v1 = tsr_ld32(w1 + i);
        const int32_t ca = col[0], cb = col[1];
        a0 = tsr_smlad(tsr_sxtb16(v0), ca, a0);
        a0 = tsr_smlad(tsr_sxtb16_ror8(v0), cb, a0);
        a1 = tsr_smlad(tsr_sxtb16(v1), ca, a1);
        a1 = tsr_smlad(tsr_sxtb16_ror8(v1), cb, a1);
    }
    for (const int16_t *c = (const int16_t *)col; i < n; i++, c++) {
        a0 += *c * w0[i];
        a1 += *c * w1[i];
    }
    *s0 = a0;
    *s1 = a1;
}

/* int16 position of element k in a column: lanes (k0, k2), (k1, k3) per
 * four elements (what sxtb16 and its ror8 form make of a filter word);
 * the tail past the last multiple of 4 stays in order */
TSR_INLINE int32_t col_index(int32_t k, int32_t n)
{
    static const uint8_t lane[4] = {0, 2, 1, 3};
    return k < (n & ~3) ? (k & ~3) + lane[k & 3] : k;
}

/* dot2_col for two pixels' columns: each filter word is unpacked once for both */
TSR_INLINE void dot2x2_col(const int32_t *col0, const int32_t *col1, const int8_t *w0, const int8_t *w1,
                           int32_t n, int32_t *s)
{
    int32_t a00 = s[0], a01 = s[1], a10 = s[2], a11 = s[3], i = 0;
    for (; i + 4 <= n; i += 4, col0 += 2, col1 += 2) {
        const uint32_t v0 = tsr_ld32(w0 + i), v1 = tsr_ld32(w1 + i);
        const int32_t w0a = tsr_sxtb16(v0), w0b = tsr_sxtb16_ror8(v0);
        const int32_t w1a = tsr_sxtb16(v1), w1b = tsr_sxtb16_ror8(v1);
        const int32_t pa = col0[0], pb = col0[1], qa = col1[0], qb = col1[1];
        a00 = tsr_smlad(w0a, pa, a00);
        a00 = tsr_smlad(w0b, pb, a00);
        a01 = tsr_smlad(w0a, qa, a01);
        a01 = tsr_smlad(w0b, qb, a01);
        a10 = tsr_smlad(w1a, pa, a10);
        a10 = tsr_smlad(w1b, pb, a10);
        a11 = tsr_smlad(w1a, qa, a11);
        a11 = tsr_smlad(w1b, qb, a11);
    }
    for (const int16_t *c0 = (const int16_t *)col0, *c1 = (const int16_t *)col1; i < n; i++, c0++, c1++) {
        a00 += *c0 * w0[i];
        a01 += *c1 * w0[i];
        a10 += *c0 * w1[i];
        a11 += *c1 * w1[i];
    }
    s[0] = a00;
    s[1] = a01;
    s[2] = a10;
    s[3] = a11;
}

/* Output pixel p's window as a column (col_index order, 0 in the padding);
 * returns the weight offset's share: weight_offset * sum of the column */
static int32_t build_col(const tsr_conv_args_t *a, int32_t p, int16_t *col, int32_t n)
{
    const int32_t in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    const int32_t iy0 = p / a->out_w * a->sh - a->pad_t, ix0 = p % a->out_w * a->sw - a->pad_l;
    int32_t k = 0, sum = 0;
    for (int32_t ky = 0; ky < kh; ky++) {
        const int32_t iy = iy0 + ky;
        for (int32_t kx = 0; kx < kw; kx++) {
            const int32_t ix = ix0 + kx;
            if (iy < 0 || iy >= a->in_h || ix < 0 || ix >= a->in_w) {
                for (int32_t ci = 0; ci < in_c; ci++, k++)
                    col[col_index(k, n)] = 0;
            } else {
                const int8_t *x = a->in + ((size_t)iy * a->in_w + ix) * in_c;
                for (int32_t ci = 0; ci < in_c; ci++, k++)
                    col[col_index(k, n)] = (int16_t)(x[ci] + off);
                if (a->weight_offset)
                    sum += sum_off(x, in_c, off);
            }
        }
    }
    return a->weight_offset * sum;
}

/* Pixels two at a time (two columns, `pair`) in raster order, or one */
static void conv_col(const tsr_conv_args_t *a, int16_t *col0, int16_t *col1)
{
    const int32_t n = a->kh * a->kw * a->in_c, pixels = a->out_h * a->out_w;
    int32_t p = 0;
    for (; col1 && p + 1 < pixels; p += 2) {
        const size_t o0 = (size_t)p * a->out_c, o1 = o0 + a->out_c;
        const int32_t t0 = build_col(a, p, col0, n), t1 = build_col(a, p + 1, col1, n);
        for (int32_t c = 0; c < a->out_c; c += 2) {
            const int32_t c1 = c + 1 < a->out_c ? c + 1 : c;
            int32_t s[4] = {bias(a, c) + t0, bias(a, c) + t1, bias(a, c1) + t0, bias(a, c1) + t1};
            dot2x2_col((const int32_t *)(void *)col0, (const int32_t *)(void *)col1, a->weights + (size_t)c * n,
                       a->weights + (size_t)c1 * n, n, s);
            store(a, o0, c, s[0]);
            store(a, o1, c, s[1]);
            if (c1 != c) {
                store(a, o0, c1, s[2]);
                store(a, o1, c1, s[3]);
            }
        }
    }
    for (; p < pixels; p++) {
        const size_t o = (size_t)p * a->out_c;
        const int32_t t = build_col(a, p, col0, n);
        for (int32_t c = 0; c < a->out_c; c += 2) {
            const int32_t c1 = c + 1 < a->out_c ? c + 1 : c;
            int32_t s0 = bias(a, c) + t, s1 = bias(a, c1) + t;
            dot2_col((const int32_t *)(void *)col0, a->weights + (size_t)c * n, a->weights + (size_t)c1 * n, n,
                     &s0, &s1);
            store(a, o, c, s0);
            if (c1 != c)
                store(a, o, c1, s1);
        }
    }
}

void tsr_cmsis_conv2d_rq(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    const size_t filter = (size_t)kh * kw * in_c;
    (void)ncores;
    if (core != 0 || (k64(a) && tsr_glue_conv(a, TSR_RQ_K64)))
        return;
    /* Columns pay where window rows are short runs (a first layer's one
     * channel: in place, each run ends in a scalar tail) or enough channel
     * pairs share them: building costs about 8 instructions per element,
     * reading in place 1 more per 4 elements and channel pair, and two
     * columns (two pixels per filter word) save as much again (stm32h7,
     * DORY's networks: 16 output channels read in place, 32 take columns).
     * x + off in an int16 lane: |off| <= 255. */
    const size_t col_bytes = (2 * filter + 3) & ~(size_t)3;
    if (a->scratch && (size_t)a->scratch_bytes >= col_bytes && ((uintptr_t)a->scratch & 3) == 0
        && off >= -255 && off <= 255) {
        int16_t *col0 = (int16_t *)(void *)a->scratch;
        int16_t *col1 = (size_t)a->scratch_bytes >= 2 * col_bytes ? (int16_t *)(void *)(a->scratch + col_bytes) : NULL;
        if (kw * in_c < 16 || a->out_c >= (col1 ? 32 : 64)) {
            conv_col(a, col0, col1);
            return;
        }
    }
    for (int32_t oy = 0; oy < a->out_h; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        for (int32_t ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            const size_t o = ((size_t)oy * a->out_w + ox) * a->out_c;
            tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
            /* the columns kx0..kx1 of a window row are one run of (kx1 - kx0) * in_c */
            const int32_t run = (kx1 - kx0) * in_c;
            int32_t t = 0;
            if (a->weight_offset) {
                for (int32_t ky = ky0; ky < ky1; ky++)
                    t += sum_off(a->in + ((size_t)(iy0 + ky) * a->in_w + (ix0 + kx0)) * in_c, run, off);
                t *= a->weight_offset;
            }
            for (int32_t c = 0; c < a->out_c; c += 2) {
                const int32_t c1 = c + 1 < a->out_c ? c + 1 : c;
                int32_t s0 = bias(a, c) + t, s1 = bias(a, c1) + t;
                for (int32_t ky = ky0; ky < ky1; ky++) {
                    const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (ix0 + kx0)) * in_c;
                    const size_t wo = ((size_t)ky * kw + kx0) * in_c;
                    dot2(x, a->weights + c * filter + wo, a->weights + c1 * filter + wo, run, off, &s0, &s1);
                }
                store(a, o, c, s0);
                if (c1 != c)
                    store(a, o, c1, s1);
            }
        }
    }
}

/* out[p][c] = sum over k of (x[p][k] + off) * w[c][k]: pointwise (p: pixels,
 * k: input channels) and fully connected (one p, k: the whole input) */
static void rows(const tsr_conv_args_t *a, int32_t pixels, int32_t k)
{
    for (int32_t p = 0; p < pixels; p++) {
        const int8_t *x = a->in + (size_t)p * k;
        const size_t o = (size_t)p * a->out_c;
        const int32_t t = a->weight_offset ? a->weight_offset * sum_off(x, k, a->input_offset) : 0;
        for (int32_t c = 0; c < a->out_c; c += 2) {
            const int32_t c1 = c + 1 < a->out_c ? c + 1 : c;
            int32_t s0 = bias(a, c) + t, s1 = bias(a, c1) + t;
            dot2(x, a->weights + (size_t)c * k, a->weights + (size_t)c1 * k, k, a->input_offset, &s0, &s1);
            store(a, o, c, s0);
            if (c1 != c)
                store(a, o, c1, s1);
        }
    }
}

void tsr_cmsis_pointwise_rq(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core == 0 && !(k64(a) && tsr_glue_conv(a, TSR_RQ_K64)))
        rows(a, a->out_h * a->out_w, a->in_c);
}

void tsr_cmsis_linear_rq(const tsr_conv_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    if (k64(a)) {
        int32_t bytes;
        int32_t *buf = tsr_glue_buf(a, &bytes);
        const tsr_mm_t m = tsr_glue_mm(a, a->in_h * a->in_w * a->in_c);
        tsr_mm_fc(&m, a->in, a->input_offset, (int8_t *)a->out, buf, bytes, TSR_RQ_K64);
        return;
    }
    rows(a, 1, a->in_h * a->in_w * a->in_c);
}

/* two int16 lanes in a word, lo in the bottom half */
TSR_INLINE int32_t lanes16(int32_t lo, int32_t hi)
{
    return (int32_t)(((uint32_t)(uint16_t)lo) | ((uint32_t)(uint16_t)hi << 16));
}

/* Depthwise: four channels per input word, each with its own accumulator
 * (smlabb/smlatt on the sxtab16 lanes), the filter brought once per call
 * into the scratch as int16 lane pairs [kh * kw][channel group][2 words]:
 * (w[c], w[c + 2]), (w[c + 1], w[c + 3]). Channels past the last group of
 * four, or without the scratch, take a scalar loop. */
void tsr_cmsis_depthwise_rq(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t C = a->out_c, kh = a->kh, kw = a->kw, area = kh * kw, off = a->input_offset;
    const int32_t groups = C / 4, woff = a->weight_offset;
    int32_t *wt = (int32_t *)(void *)a->scratch;
    (void)ncores;
    if (core != 0 || (k64(a) && tsr_glue_depthwise(a, TSR_RQ_K64)))
        return;
    if (!wt || ((uintptr_t)wt & 3) != 0 || (size_t)a->scratch_bytes < (size_t)8 * area * groups
        || off < -255 || off > 255)
        wt = NULL;
    if (wt) {
        for (int32_t p = 0; p < area; p++) {
            for (int32_t g = 0; g < groups; g++) {
                const int8_t *w = a->weights + (size_t)g * 4 * area + p;
                int32_t *d = wt + ((size_t)p * groups + g) * 2;
                d[0] = lanes16(w[0] + woff, w[2 * area] + woff);
                d[1] = lanes16(w[area] + woff, w[3 * area] + woff);
            }
        }
    }
    const int32_t off2 = tsr_dup16(off);
    for (int32_t oy = 0; oy < a->out_h; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        for (int32_t ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            const size_t o = ((size_t)oy * a->out_w + ox) * C;
            int32_t c = 0;
            tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
            if (wt) {
                for (int32_t g = 0; g < groups; g++, c += 4) {
                    int32_t s0 = bias(a, c), s1 = bias(a, c + 1), s2 = bias(a, c + 2), s3 = bias(a, c + 3);
                    for (int32_t ky = ky0; ky < ky1; ky++) {
                        const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + ix0) * C + c;
                        const int32_t *w = wt + ((size_t)(ky * kw) * groups + g) * 2;
                        for (int32_t kx = kx0; kx < kx1; kx++) {
                            const uint32_t xv = tsr_ld32(x + (size_t)kx * C);
                            const int32_t xa = tsr_sxtab16(off2, xv), xb = tsr_sxtab16_ror8(off2, xv);
                            const int32_t *wk = w + (size_t)kx * groups * 2;
                            s0 = tsr_smlabb(xa, wk[0], s0);
                            s2 = tsr_smlatt(xa, wk[0], s2);
                            s1 = tsr_smlabb(xb, wk[1], s1);
                            s3 = tsr_smlatt(xb, wk[1], s3);
                        }
                    }
                    store(a, o, c, s0);
                    store(a, o, c + 1, s1);
                    store(a, o, c + 2, s2);
                    store(a, o, c + 3, s3);
                }
            }
            for (; c < C; c++) {
                int32_t s = bias(a, c);
                for (int32_t ky = ky0; ky < ky1; ky++) {
                    const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + ix0) * C + c;
                    const int8_t *w = a->weights + (size_t)c * area + ky * kw;
                    for (int32_t kx = kx0; kx < kx1; kx++)
                        s += (x[(size_t)kx * C] + off) * (w[kx] + woff);
                }
                store(a, o, c, s);
            }
        }
    }
}
