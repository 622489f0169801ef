/*
 * Resize (tsr_resize_args_t) on the Cortex-M cores. Written for tessera.
 * tsr_resize computes every output from four taps in 64-bit arithmetic and
 * requantizes it through the generic tsr_requantize. Here:
 *
 * - nearest (every row and column fraction 0): each output pixel is an
 *   input pixel mapped value by value, y = rq(F * F * (x + input_offset));
 *   when that map is the identity (ONNX and TFLite nearest resizes keep
 *   the input's quantization) a pixel is a copy, eight bytes a turn, and an
 *   output row whose source row is the previous one's is a copy of that
 *   row; else the 256 values are requantized once into a table looked up a
 *   word at a time (the table from tsr_requantize_index itself);
 * - bilinear: four channels a turn, each row's two taps paired into int16
 *   lanes (pkhbt/pkhtb of sxtb16s) so one smlad gives a row's horizontal
 *   sum; the input offset is the constant input_offset * (wy0 + wy1) *
 *   (wx0 + wx1) of the pixel, added once; the sums are exact in int32
 *   (checked per call from the weights' sizes, else tsr_resize), and the
 *   requantization chosen once per call: tsr_rq_t's high-word form (half
 *   up or floor, shift >= 33), TFLite's rounded division by a power of two
 *   (ResizeBilinearInteger), or tsr_requantize_index.
 */
#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_bytes.h"
#include "tsr_dsp.h"

enum { RQ_HIGH, RQ_DIV_POT, RQ_ANY };

typedef struct {
    int32_t form, mul, round, shift, zp, lo, hi;
} resize_rq_t;

static resize_rq_t rq_choose(const tsr_requant_t *rq)
{
    resize_rq_t r = {RQ_ANY, rq->mul[0], 0, rq->shift[0], rq->zero_point, rq->lo, rq->hi};
    const int32_t s = rq->shift[0], m = rq->mul[0];
    if ((rq->add && rq->add[0]) || rq->neg_mul || rq->divisor > 1)
        return r;
    if (s <= 62 && ((rq->rounding == TSR_ROUND_HALF_UP && s >= 33) || (rq->rounding == TSR_ROUND_FLOOR && s >= 32))) {
        r.form = RQ_HIGH;
        r.round = rq->rounding == TSR_ROUND_HALF_UP ? (int32_t)1 << (s - 33) : 0;
        r.shift = s - 32;
    } else if (rq->rounding == TSR_ROUND_TFLITE_DIV && m >= 2 && (m & (m - 1)) == 0) {
        r.form = RQ_DIV_POT;
        r.round = m >> 1;
        r.shift = 31 - __builtin_clz((uint32_t)m);
    }
    return r;
}

/* one requantized value; `form` and `sat` (the clamp is int8's own range:
 * one ssat) are constants where the loops below are instantiated */
TSR_INLINE int32_t rq_one(int32_t acc, const resize_rq_t *r, const tsr_requant_t *rq, int form, int sat)
{
    int32_t v;
    if (form == RQ_HIGH) {
        v = ((int32_t)(((int64_t)acc * r->mul) >> 32) + r->round) >> r->shift;
    } else if (form == RQ_DIV_POT) {
        /* round half away from zero: (a + n/2) >> k, one less below zero */
        v = (acc + r->round + (acc >> 31)) >> r->shift;
    } else {
        return tsr_requantize_index(acc, rq, 0);
    }
    return sat ? tsr_sat8(v + r->zp) : tsr_clamp(v + r->zp, r->lo, r->hi);
}

static void nearest(const tsr_resize_args_t *a)
{
    const int32_t C = a->c, row = a->out_w * C;
    const int64_t f2 = (int64_t)1 << (2 * a->frac);
    uint8_t map[256];
    int identity = 1;
    for (int32_t v = -128; v < 128; v++) {
        const int32_t y = tsr_requantize_index(f2 * (v + a->input_offset), a->rq, 0);
        map[v + 128] = (uint8_t)y;
        identity = identity && y == v;
    }
    for (int32_t oy = 0; oy < a->out_h; oy++) {
        int8_t *y = a->out + (size_t)oy * row;
        if (oy > 0 && a->rows[3 * oy] == a->rows[3 * oy - 3]) {
            tsr_copy_run(y, y - row, row);
            continue;
        }
        const int8_t *src = a->in + (size_t)a->rows[3 * oy] * a->in_w * C;
        for (int32_t ox = 0; ox < a->out_w; ox++, y += C) {
            const int8_t *x = src + (size_t)a->cols[3 * ox] * C;
            if (identity)
                tsr_copy_run(y, x, C);
            else
                tsr_map_run(y, x, C, map + 128);
        }
    }
}

/* the two taps of 4 channels (words p, q) as int16 pairs (p_k, q_k), k = 0..3 */
TSR_INLINE void pair4(uint32_t p, uint32_t q, int32_t *k0, int32_t *k1, int32_t *k2, int32_t *k3)
{
    const int32_t pe = tsr_sxtb16(p), po = tsr_sxtb16_ror8(p), qe = tsr_sxtb16(q), qo = tsr_sxtb16_ror8(q);
#if TSR_HAVE_DSP
    /* pkhbt: (lo of the first, lo of the second); pkhtb: (hi of the second, hi of the first) */
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(*k0) : "r"(pe), "r"(qe));
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(*k2) : "r"(qe), "r"(pe));
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(*k1) : "r"(po), "r"(qo));
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(*k3) : "r"(qo), "r"(po));
#else
    *k0 = tsr_pack16(tsr_lo16(pe), tsr_lo16(qe));
    *k2 = tsr_pack16(tsr_hi16(pe), tsr_hi16(qe));
    *k1 = tsr_pack16(tsr_lo16(po), tsr_lo16(qo));
    *k3 = tsr_pack16(tsr_hi16(po), tsr_hi16(qo));
#endif
}

/* one output pixel's C channels from its four taps (pixels p0, q0 of the
 * upper row, p1, q1 of the lower) */
TSR_INLINE void bilinear_pixel(int8_t *y, const int8_t *p0, const int8_t *q0, const int8_t *p1, const int8_t *q1,
                               int32_t C, int32_t wx, int32_t wy0, int32_t wy1, int32_t k, const resize_rq_t *r,
                               const tsr_requant_t *rq, int form, int sat)
{
    int32_t c = 0;
    for (; c + 4 <= C; c += 4) {
        int32_t t0, t1, t2, t3, b0, b1, b2, b3;
        pair4(tsr_ld32(p0 + c), tsr_ld32(q0 + c), &t0, &t1, &t2, &t3);
        pair4(tsr_ld32(p1 + c), tsr_ld32(q1 + c), &b0, &b1, &b2, &b3);
        const int32_t v0 = rq_one(wy0 * tsr_smlad(t0, wx, 0) + wy1 * tsr_smlad(b0, wx, 0) + k, r, rq, form, sat);
        const int32_t v1 = rq_one(wy0 * tsr_smlad(t1, wx, 0) + wy1 * tsr_smlad(b1, wx, 0) + k, r, rq, form, sat);
        const int32_t v2 = rq_one(wy0 * tsr_smlad(t2, wx, 0) + wy1 * tsr_smlad(b2, wx, 0) + k, r, rq, form, sat);
        const int32_t v3 = rq_one(wy0 * tsr_smlad(t3, wx, 0) + wy1 * tsr_smlad(b3, wx, 0) + k, r, rq, form, sat);
        tsr_st32(y + c, (uint32_t)(uint8_t)v0 | (uint32_t)(uint8_t)v1 << 8 | (uint32_t)(uint8_t)v2 << 16
                        | (uint32_t)(uint8_t)v3 << 24);
    }
    const int32_t wx0 = (int16_t)(uint32_t)wx, wx1 = (int16_t)((uint32_t)wx >> 16);
    for (; c < C; c++) {
        const int32_t h0 = wx0 * p0[c] + wx1 * q0[c], h1 = wx0 * p1[c] + wx1 * q1[c];
        y[c] = (int8_t)rq_one(wy0 * h0 + wy1 * h1 + k, r, rq, form, sat);
    }
}

TSR_INLINE void bilinear_form(const tsr_resize_args_t *a, const resize_rq_t *r, int form, int sat)
{
    const int32_t C = a->c, one = 1 << a->frac, off = a->input_offset;
    for (int32_t oy = 0; oy < a->out_h; oy++) {
        const int32_t *ry = a->rows + 3 * oy;
        const int8_t *row0 = a->in + (size_t)ry[0] * a->in_w * C;
        const int8_t *row1 = a->in + (size_t)ry[1] * a->in_w * C;
        const int32_t wy0 = one - ry[2], wy1 = ry[2];
        int8_t *y = a->out + (size_t)oy * a->out_w * C;
        for (int32_t ox = 0; ox < a->out_w; ox++, y += C) {
            const int32_t *rx = a->cols + 3 * ox;
            const int32_t wx0 = one - rx[2], wx1 = rx[2];
            const int32_t k = off * (wy0 + wy1) * (wx0 + wx1);
            const size_t x0 = (size_t)rx[0] * C, x1 = (size_t)rx[1] * C;
            bilinear_pixel(y, row0 + x0, row0 + x1, row1 + x0, row1 + x1, C, (int32_t)((uint32_t)(uint16_t)wx0 | (uint32_t)wx1 << 16), wy0, wy1, k,
                           r, a->rq, form, sat);
        }
    }
}

static void bilinear(const tsr_resize_args_t *a, const resize_rq_t *r)
{
    const int sat = r->lo <= -128 && r->hi >= 127;
    if (r->form == RQ_HIGH && sat)
        bilinear_form(a, r, RQ_HIGH, 1);
    else if (r->form == RQ_DIV_POT && sat)
        bilinear_form(a, r, RQ_DIV_POT, 1);
    else
        bilinear_form(a, r, r->form, 0);
}

/* the largest |w0| + |w1| of a table's triples (rows or columns) */
static int32_t weight_span(const int32_t *t, int32_t n, int32_t one)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t w0 = one - t[3 * i + 2], w1 = t[3 * i + 2];
        const int32_t s = (w0 < 0 ? -w0 : w0) + (w1 < 0 ? -w1 : w1);
        m = s > m ? s : m;
    }
    return m;
}

void tsr_cmsis_resize(const tsr_resize_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    int flat = 1;
    for (int32_t i = 0; flat && i < a->out_h; i++)
        flat = a->rows[3 * i + 2] == 0;
    for (int32_t i = 0; flat && i < a->out_w; i++)
        flat = a->cols[3 * i + 2] == 0;
    if (flat) {
        nearest(a);
        return;
    }
    /* every sum within int32: the two taps' weights (int16 lanes of the
     * smlad) times the largest |x| and the offset term */
    if (a->frac > 14) {
        tsr_resize(a, 0, 1);
        return;
    }
    const int32_t one = 1 << a->frac;
    const int64_t sy = weight_span(a->rows, a->out_h, one), sx = weight_span(a->cols, a->out_w, one);
    const int64_t off = a->input_offset < 0 ? -(int64_t)a->input_offset : a->input_offset;
    if (sx > 32767 || sy * sx * (128 + off) >= ((int64_t)1 << 31)) {
        tsr_resize(a, 0, 1);
        return;
    }
    const resize_rq_t r = rq_choose(a->rq);
    bilinear(a, &r);
}
