/*
 * Reference kernels of the table-driven and multi-input ops (see
 * kernels.h): broadcast mul/add, lookup tables, concatenation, resize and
 * softmax. Each core takes a contiguous share of the outermost loop.
 */
#include <string.h>

#include "ref_common.h"
#include "tessera/attention.h"

/* element index of (y, x, c) in an operand of dims (h, w, c), size-1 dims repeating */
static inline size_t bcast_index(int32_t y, int32_t x, int32_t c, int32_t h, int32_t w, int32_t ch)
{
    return ((size_t)(h == 1 ? 0 : y) * (size_t)w + (size_t)(w == 1 ? 0 : x)) * (size_t)ch + (size_t)(ch == 1 ? 0 : c);
}

static void binary(const tsr_binary_args_t *a, int core, int ncores, int is_mul)
{
    int32_t r0, r1, y, x, c;
    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    for (y = r0; y < r1; y++) {
        for (x = 0; x < a->out_w; x++) {
            int8_t *o = a->out + ((size_t)y * a->out_w + x) * a->out_c;
            for (c = 0; c < a->out_c; c++) {
                int64_t va = (int64_t)a->a[bcast_index(y, x, c, a->a_h, a->a_w, a->a_c)] + a->in_offset[0];
                int64_t vb = (int64_t)a->b[bcast_index(y, x, c, a->b_h, a->b_w, a->b_c)] + a->in_offset[1];
                int64_t acc = is_mul ? va * vb : va * a->in_mul[0] + vb * a->in_mul[1];
                o[c] = (int8_t)tsr_requantize(acc, a->rq, 0);
            }
        }
    }
}

void tsr_mul(const tsr_binary_args_t *a, int core, int ncores)
{
    binary(a, core, ncores, 1);
}

void tsr_add_broadcast(const tsr_binary_args_t *a, int core, int ncores)
{
    binary(a, core, ncores, 0);
}

void tsr_lut(const tsr_lut_args_t *a, int core, int ncores)
{
    int32_t p0, p1, p, c;
    tsr_ref_share(a->pixels, core, ncores, &p0, &p1);
    for (p = p0; p < p1; p++) {
        const int8_t *x = a->in + (size_t)p * a->c;
        int8_t *y = a->out + (size_t)p * a->c;
        if (a->per_channel) {
            for (c = 0; c < a->c; c++)
                y[c] = a->table[(size_t)c * 256 + (x[c] + 128)];
        } else {
            for (c = 0; c < a->c; c++)
                y[c] = a->table[x[c] + 128];
        }
    }
}

/* 1 when the requantization returns its int8 input unchanged (mul 1,
 * shift 0, nothing added, no clamp inside int8): a concatenation of
 * tensors that share its quantization (TFLite's, most ONNX ones) */
static int identity_rq(const tsr_requant_t *rq)
{
    return rq->mul[0] == 1 && rq->shift[0] == 0 && (!rq->add || rq->add[0] == 0) && !rq->per_channel
           && rq->zero_point == 0 && rq->lo <= -128 && rq->hi >= 127 && !rq->elem.plane && rq->divisor <= 1
           && !rq->neg_mul;
}

void tsr_concat(const tsr_concat_args_t *a, int core, int ncores)
{
    int32_t o0, o1, o, i, k, total = 0, copy = identity_rq(a->rq);
    for (i = 0; i < a->n_in; i++) {
        total += a->inner[i];
        copy = copy && a->in_mul[i] == 1 && a->in_offset[i] == 0;
    }
    tsr_ref_share(a->outer, core, ncores, &o0, &o1);
    for (o = o0; o < o1; o++) {
        int8_t *y = a->out + (size_t)o * total;
        for (i = 0; i < a->n_in; i++) {
            const int8_t *x = a->in[i] + (size_t)o * a->inner[i];
            if (copy) {
                memcpy(y, x, (size_t)a->inner[i]);
                y += a->inner[i];
                continue;
            }
            for (k = 0; k < a->inner[i]; k++)
                y[k] = (int8_t)tsr_requantize((int64_t)(x[k] + a->in_offset[i]) * a->in_mul[i], a->rq, 0);
            y += a->inner[i];
        }
    }
}

void tsr_resize(const tsr_resize_args_t *a, int core, int ncores)
{
    const int32_t one = 1 << a->frac, C = a->c;
    int32_t r0, r1, oy, ox, c;
    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    for (oy = r0; oy < r1; oy++) {
        const int32_t *ry = a->rows + 3 * oy;
        const int8_t *row0 = a->in + (size_t)ry[0] * a->in_w * C;
        const int8_t *row1 = a->in + (size_t)ry[1] * a->in_w * C;
        const int64_t wy0 = one - ry[2], wy1 = ry[2];
        for (ox = 0; ox < a->out_w; ox++) {
            const int32_t *rx = a->cols + 3 * ox;
            const size_t x0 = (size_t)rx[0] * C, x1 = (size_t)rx[1] * C;
            const int64_t wx0 = one - rx[2], wx1 = rx[2];
            int8_t *y = a->out + ((size_t)oy * a->out_w + ox) * C;
            for (c = 0; c < C; c++) {
                int64_t off = a->input_offset;
                int64_t acc = wy0 * (wx0 * (row0[x0 + c] + off) + wx1 * (row0[x1 + c] + off))
                            + wy1 * (wx0 * (row1[x0 + c] + off) + wx1 * (row1[x1 + c] + off));
                y[c] = (int8_t)tsr_requantize(acc, a->rq, 0);
            }
        }
    }
}

/* gemmlowp's SaturatingRoundingMultiplyByPOT for a left shift */
static int32_t tfl_mul_pot_left(int32_t x, int32_t e)
{
    const int32_t threshold = (int32_t)(((uint32_t)1 << (31 - e)) - 1);
    if (x > threshold)
        return INT32_MAX;
    if (x < -threshold)
        return INT32_MIN;
    return (int32_t)((uint32_t)x << e);
}

/* gemmlowp's one_over_one_plus_x_for_x_in_0_1 (Q0.31): Newton-Raphson in
 * Q2.29 from 48/17 - 32/17 * d, three steps */
static int32_t tfl_one_over_one_plus_x(int32_t a)
{
    const int64_t s = (int64_t)a + INT32_MAX;   /* RoundingHalfSum(a, 1.0) */
    const int32_t half = (int32_t)(s >= 0 ? (s + 1) / 2 : -((1 - s) / 2));
    int32_t x = (int32_t)((uint32_t)1515870810 + (uint32_t)tsr_tfl_srdhm(half, -1010580540));
    int i;
    for (i = 0; i < 3; i++) {
        int32_t one_minus = (int32_t)(((uint32_t)1 << 29) - (uint32_t)tsr_tfl_srdhm(half, x));
        x = (int32_t)((uint32_t)x + (uint32_t)tfl_mul_pot_left(tsr_tfl_srdhm(x, one_minus), 2));
    }
    return tfl_mul_pot_left(x, 1);
}

/* RoundingDivideByPOT for exponents up to 34 (the softmax's last step on
 * rows of more than 511 values): the same rounding in 64 bits. */
static inline int32_t rdbpot64(int32_t x, int32_t e)
{
    int64_t mask = ((int64_t)1 << e) - 1, remainder = (int64_t)x & mask;
    int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (int32_t)(((int64_t)x >> e) + (remainder > threshold ? 1 : 0));
}

/* TFLite's reference int8 softmax of one pixel (reference_ops::Softmax):
 * the table holds exp(-d) in Q0.31, the sum is Q12.19 */
static void softmax_tflite(const tsr_softmax_args_t *a, const int8_t *x, int8_t *y)
{
    int32_t c, max = x[0], headroom, scale, e;
    uint32_t total = 0;
    for (c = 1; c < a->c; c++)
        if (x[c] > max)
            max = x[c];
    for (c = 0; c < a->c; c++)
        total += (uint32_t)tsr_tfl_rdbpot(a->table[max - x[c]], 12);
    /* the maximum adds 2^19, so 1 <= headroom <= 12 (the frontend keeps a
     * row to at most 4095 values, as the Q12.19 sum holds); the exponent
     * below is at most 34 */
    headroom = __builtin_clz(total);
    scale = tfl_one_over_one_plus_x((int32_t)((total << headroom) - 0x80000000u));
    e = 12 - headroom + 31 - 8;
    for (c = 0; c < a->c; c++) {
        int32_t v = rdbpot64(tsr_tfl_srdhm(scale, a->table[max - x[c]]), e) + a->zero_point;
        y[c] = (int8_t)(v < a->lo ? a->lo : v > a->hi ? a->hi : v);
    }
}

/* One row of the table softmax without a 64-bit division per value: with
 * X = (E * mul + (s << (shift - 1))) >> shift, the output is floor(X / s)
 * (floor(a / (s * 2^S)) = floor(floor(a / 2^S) / s)), and for
 * 2^24 <= s < 2^32 (the maximum contributes E[0] = 2^24) and X < 2^42 the
 * reciprocal r = floor(2^42 / s) gives q = (X * r) >> 42 within one below
 * it (X * r / 2^42 >= X / s - X / 2^42 > X / s - 1): one multiply and one
 * correction. X >= s << 10 means a quotient of 1024 or more: the clamp. */
static void softmax_row_reciprocal(const tsr_softmax_args_t *a, const int8_t *x, int8_t *y, int32_t max, uint32_t s)
{
    const uint32_t r = (uint32_t)(((uint64_t)1 << 42) / s);
    const uint64_t half = (uint64_t)s << (a->shift - 1), big = (uint64_t)s << 10;
    int32_t c;
    for (c = 0; c < a->c; c++) {
        const uint64_t X = ((uint64_t)(uint32_t)a->table[max - x[c]] * (uint32_t)a->mul + half) >> a->shift;
        int32_t v;
        if (X >= big) {
            v = a->hi;
        } else {
            uint32_t q = (uint32_t)((X * r) >> 42);
            if ((uint64_t)(q + 1) * s <= X)
                q++;
            v = (int32_t)q + a->zero_point;
            if (v < a->lo) v = a->lo;
            if (v > a->hi) v = a->hi;
        }
        y[c] = (int8_t)v;
    }
}

void tsr_softmax(const tsr_softmax_args_t *a, int core, int ncores)
{
    int32_t p0, p1, p, c;
    tsr_ref_share(a->pixels, core, ncores, &p0, &p1);
    for (p = p0; p < p1; p++) {
        const int8_t *x = a->in + (size_t)p * a->c;
        int8_t *y = a->out + (size_t)p * a->c;
        if (a->rounding == TSR_ROUND_TFLITE) {
            softmax_tflite(a, x, y);
            continue;
        }
        if (a->mode != TSR_SOFTMAX_TABLE) {
            tsr_softmax_deeploy_row(a, x, y);
            continue;
        }
        int32_t max = x[0];
        int64_t s = 0, den, half;
        for (c = 1; c < a->c; c++)
            if (x[c] > max)
                max = x[c];
        for (c = 0; c < a->c; c++)
            s += a->table[max - x[c]];
        den = s << a->shift;
        half = a->shift > 0 ? s << (a->shift - 1) : s / 2;
        if (a->shift > 0 && s >= (1 << 24) && s < ((int64_t)1 << 32)) {
            softmax_row_reciprocal(a, x, y, max, (uint32_t)s);
            continue;
        }
        for (c = 0; c < a->c; c++) {
            int64_t v = ((int64_t)a->table[max - x[c]] * a->mul + half) / den + a->zero_point;
            if (v < a->lo) v = a->lo;
            if (v > a->hi) v = a->hi;
            y[c] = (int8_t)v;
        }
    }
}
