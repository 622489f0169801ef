/*
 * Attention's row-wise ops (the table softmax, the QDQ layer norm, Deeploy's
 * iLayerNorm) one row at a time in 32-bit arithmetic, for the optimized
 * libraries (kernels/pulp_nn/rowwise.c, kernels/cmsis_nn/rowwise.c): the
 * reference kernels' results (kernels/reference/attention.c, elementwise.c)
 * bit for bit, without a 64-bit operation per value. The per-row constants
 * are computed once (a row's sums come from the library's own SIMD loop);
 * each 64-bit quantity the reference forms per value is kept as two 32-bit
 * words (a 32x32 product's low and high words, an add with its carry, a
 * shift across the words), which is exact, not an approximation. A row the
 * 32-bit bounds below do not cover returns 0 and the caller runs the
 * reference row function on it.
 */
#ifndef TESSERA_ROWWISE_H
#define TESSERA_ROWWISE_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/attention.h"
#include "tessera/kernels.h"

#define TSR_RW_INLINE static inline __attribute__((always_inline))

/* high words of 32x32 products (mulh, mulhu, mulhsu on RISC-V; smull, umull on Arm) */
TSR_RW_INLINE int32_t tsr_rw_mulh(int32_t a, int32_t b)
{
    return (int32_t)(((int64_t)a * b) >> 32);
}

TSR_RW_INLINE uint32_t tsr_rw_mulhu(uint32_t a, uint32_t b)
{
    return (uint32_t)(((uint64_t)a * b) >> 32);
}

TSR_RW_INLINE int32_t tsr_rw_mulhsu(int32_t a, uint32_t b)
{
    return (int32_t)(((int64_t)a * (int64_t)b) >> 32);
}

/* floor((hi * 2^32 + lo) / 2^s) for 1 <= s <= 63, its value within int32 */
TSR_RW_INLINE int32_t tsr_rw_shr(uint32_t lo, int32_t hi, int32_t s)
{
    return s >= 32 ? hi >> (s - 32) : (int32_t)((lo >> s) | ((uint32_t)hi << (32 - s)));
}

/* 2^(s - 1) as (low, high) words, 1 <= s <= 63 */
TSR_RW_INLINE void tsr_rw_half(int32_t s, uint32_t *lo, int32_t *hi)
{
    *lo = s <= 32 ? (uint32_t)1 << (s - 1) : 0;
    *hi = s > 32 ? (int32_t)1 << (s - 33) : 0;
}

/* ---- the table softmax (tsr_softmax, mode TSR_SOFTMAX_TABLE, not TFLite's) ----
 * y = clamp(zp + floor((E * mul + s 2^(S-1)) / (s 2^S))), E = table[max - x],
 * s the row's sum of E. As the reference's fast path, for 2^24 <= s < 2^32
 * and 1 <= S <= 31: X = (E * mul + s 2^(S-1)) >> S (42 bits, words Xh:Xl),
 * X >= s 2^10 the clamp to hi, else q = (X * r) >> 42 with r = floor(2^42 / s)
 * (< 2^18), plus one when (q + 1) s <= X. In words: X * r >> 42 =
 * (Xh r + mulhu(Xl, r)) >> 10 (Xh < 2^10: Xh r < 2^28), and (q + 1) s is
 * mulhu:mul of two 32-bit values, or for s < 2^31 the remainder X - q s in
 * one word. mul is read unsigned, as the reference does. */
typedef struct {
    uint32_t r, hl, bl;
    int32_t hh, bh, shift, mul, zp, lo, hi;
} tsr_rw_softmax_t;

/* the row's constants from its sum s (low, high words); 0: not covered */
TSR_RW_INLINE int tsr_rw_softmax_row(const tsr_softmax_args_t *a, uint32_t s, uint32_t s_hi, tsr_rw_softmax_t *k)
{
    const int32_t S = a->shift;
    if (s_hi || s < ((uint32_t)1 << 24) || S < 1 || S > 31)
        return 0;
    k->r = (uint32_t)(((uint64_t)1 << 42) / s);
    k->hl = s << (S - 1);                       /* s 2^(S-1) */
    k->hh = S > 1 ? (int32_t)(s >> (33 - S)) : 0;
    k->bl = s << 10;                            /* s 2^10 */
    k->bh = (int32_t)(s >> 22);
    k->shift = S, k->mul = a->mul, k->zp = a->zero_point, k->lo = a->lo, k->hi = a->hi;
    return 1;
}

TSR_RW_INLINE int32_t tsr_rw_softmax_value(const tsr_rw_softmax_t *k, uint32_t e, uint32_t s)
{
    const uint32_t pl = e * (uint32_t)k->mul, l = pl + k->hl;
    const uint32_t h = tsr_rw_mulhu(e, (uint32_t)k->mul) + (uint32_t)k->hh + (l < pl);
    const int32_t S = k->shift;
    const uint32_t xl = (l >> S) | (h << (32 - S)), xh = h >> S;
    uint32_t q, ql, qh;
    int32_t v;
    if (xh > (uint32_t)k->bh || (xh == (uint32_t)k->bh && xl >= k->bl))
        return k->hi;
    q = (xh * k->r + tsr_rw_mulhu(xl, k->r)) >> 10;
    if (!(s >> 31)) {
        q += xl - q * s >= s;    /* X - q s is in [0, 2s), below 2^32: its low word is all of it */
    } else {
        ql = (q + 1) * s, qh = tsr_rw_mulhu(q + 1, s);
        if (qh < xh || (qh == xh && ql <= xl))
            q++;
    }
    v = (int32_t)q + k->zp;
    return v < k->lo ? k->lo : v > k->hi ? k->hi : v;
}

/* ---- the QDQ layer norm (tsr_layernorm, mode TSR_LAYERNORM_INT) ----
 * From the row's sums S1, S2 (32-bit: the caller's loop for rows of at most
 * 4096 values and offsets within +-256, as the reference's): D, f, R = 2^62 /
 * isqrt(D << 2f) and sh = 38 - f once per row (64-bit, as the reference);
 * per value num = c x + (c off - S1), acc = (num R + 2^(sh-1)) >> sh in words
 * (num R: mul and mulhsu; |acc| < 2^23: a normalized value times 2^16), then
 * the channel's requantization (acc * mul + add + 2^(s-1)) >> s in words
 * (mul and mulh, the add's and the rounding's words with their carries). */
typedef struct {
    uint32_t r, rl;
    int32_t rh, sh, c0;
    int32_t split, r_hi, r_lo, round;   /* the 16-bit halves' form (tsr_rw_layernorm_row) */
} tsr_rw_layernorm_t;

/* 0: a row the reference's general path handles (R = 2^32) */
TSR_RW_INLINE int tsr_rw_layernorm_row(const tsr_layernorm_args_t *a, int32_t s1, int32_t s2, tsr_rw_layernorm_t *k)
{
    const int32_t n = a->c;
    uint64_t d, r;
    int32_t f;
    d = ((uint64_t)((int64_t)n * s2 - (int64_t)s1 * s1) << 16) + (uint64_t)a->eps;
    f = (62 - (64 - __builtin_clzll(d))) / 2;
    r = ((uint64_t)1 << 62) / tsr_isqrt64(d << (2 * f));
    if (r >> 32)
        return 0;
    k->r = (uint32_t)r;
    k->sh = 38 - f;
    tsr_rw_half(k->sh, &k->rl, &k->rh);
    k->c0 = n * a->input_offset - s1;
    /* the reference's form without a high product: with |num| < 2^15 (rows
     * up to 128, offsets within int8) and sh >= 17, R = r_hi 2^16 + r_lo and
     * acc = (num r_hi + 2^(sh-17) + ((num r_lo) >> 16)) >> (sh - 16), every
     * product within 32 bits (kernels/reference/attention.c) */
    k->split = n <= 128 && k->sh >= 17 && a->input_offset >= -128 && a->input_offset <= 127;
    k->r_hi = (int32_t)(k->r >> 16), k->r_lo = (int32_t)(k->r & 0xFFFF);
    k->round = k->split ? (int32_t)1 << (k->sh - 17) : 0;
    return 1;
}

/* Whether every channel's requantization takes tsr_rw_requant: half up, a
 * shift of 1 to 63, and (acc * m + add + 2^(s-1)) >> s within int32 for
 * |acc| <= 2^23 (the normalized values of rows up to 4096: |v| <= sqrt(c)
 * in Q16). Checked once per call, in 64 bits. */
TSR_RW_INLINE int tsr_rw_requant_fits(const tsr_requant_t *rq, int32_t c)
{
    int32_t j;
    if (rq->rounding != TSR_ROUND_HALF_UP || rq->divisor > 1 || rq->elem.plane || rq->neg_mul || rq->add_shift)
        return 0;
    for (j = 0; j < (rq->per_channel ? c : 1); j++) {
        const int32_t s = rq->shift[j];
        const int64_t m = rq->mul[j], add = rq->add ? rq->add[j] : 0;
        if (s < 1 || s > 63)
            return 0;
        if (s < 32 && ((m < 0 ? -m : m) << 23) + (add < 0 ? -add : add) + ((int64_t)1 << (s - 1))
                          >= ((int64_t)1 << (s + 31)))
            return 0;
    }
    return 1;
}

/* (acc * m + add + 2^(s-1)) >> s in words, for tsr_rw_requant_fits' channels:
 * the rounding's bit goes into the low word (s <= 32) or the high (s > 32),
 * without a branch */
TSR_RW_INLINE int32_t tsr_rw_requant(int32_t acc, int32_t m, int32_t add, int32_t s)
{
#if defined(__arm__)
    /* smlal and a 64-bit shift are a few instructions on Arm: the words gain nothing */
    return (int32_t)(((int64_t)acc * m + add + ((int64_t)1 << (s - 1))) >> s);
#else
    const uint32_t t = (uint32_t)(s - 1), bit = (uint32_t)1 << (t & 31), high = -(uint32_t)(t >> 5);
    uint32_t l0 = (uint32_t)acc * (uint32_t)m, l1 = l0 + (uint32_t)add;
    int32_t h = tsr_rw_mulh(acc, m) + (add >> 31) + (l1 < l0) + (int32_t)(bit & high);
    l0 = l1 + (bit & ~high);
    return tsr_rw_shr(l0, h + (l0 < l1), s);
#endif
}

TSR_RW_INLINE void tsr_rw_layernorm_values(const tsr_layernorm_args_t *a, const tsr_rw_layernorm_t *k,
                                           const int8_t *x, int8_t *y)
{
    const tsr_requant_t *rq = a->rq;
    const int32_t *mul = rq->mul, *add = rq->add;
    const int8_t *shift = rq->shift;
    const int32_t n = a->c, c0 = k->c0, sh = k->sh, rh = k->rh, per = rq->per_channel;
    const int32_t zp = rq->zero_point, lo = rq->lo, hi = rq->hi;
    const uint32_t r = k->r, rl = k->rl;
    const int32_t split = k->split, r_hi = k->r_hi, r_lo = k->r_lo, round = k->round;
    int32_t j;
    for (j = 0; j < n; j++) {
        const int32_t num = n * x[j] + c0, i = per ? j : 0;
        int32_t acc;
        if (split) {
            acc = (num * r_hi + round + ((num * r_lo) >> 16)) >> (sh - 16);
        } else {
            const uint32_t l0 = (uint32_t)num * r, l1 = l0 + rl;
            acc = tsr_rw_shr(l1, tsr_rw_mulhsu(num, r) + rh + (l1 < l0), sh);
        }
        const int32_t v = tsr_rw_requant(acc, mul[i], add ? add[i] : 0, shift[i]) + zp;
        y[j] = (int8_t)(v < lo ? lo : v > hi ? hi : v);
    }
}

/* ---- Deeploy's iLayerNorm (mode TSR_LAYERNORM_DEEPLOY) ----
 * mean = trunc(S1 / c) and var = sum (xo - mean)^2 in 32 bits (the
 * reference's widths), std = isqrt(trunc(var / c) + 1) once per row; each
 * value trunc(t * weight / std) as a 32-bit division (the bias added in 64) where |t| * max|weight|
 * < 2^31 (tmax and wmax from the caller), else the reference's 64-bit one. */
TSR_RW_INLINE void tsr_rw_ilayernorm_values(const tsr_layernorm_args_t *a, const int8_t *x, int8_t *y, int32_t s1,
                                            uint32_t wmax)
{
    const int32_t n = a->c, off = a->input_offset, mean = s1 / n, sh = a->rq->shift[0];
    const int32_t lo = a->rq->lo, hi = a->rq->hi;
    int32_t var = 0, stdv, j, tmax = 0;
    for (j = 0; j < n; j++) {
        const int32_t t = x[j] + off - mean;
        var += t * t;
        tmax = t > tmax ? t : -t > tmax ? -t : tmax;
    }
    stdv = (int32_t)tsr_isqrt64((uint64_t)(var / n + 1));
    if ((uint64_t)(uint32_t)tmax * wmax < ((uint64_t)1 << 31)) {
        for (j = 0; j < n; j++) {
            const int64_t v = ((int64_t)(((x[j] + off - mean) * a->weight[j]) / stdv) + a->bias[j]) >> sh;
            y[j] = (int8_t)(v < lo ? lo : v > hi ? hi : v);
        }
        return;
    }
    tsr_layernorm_row(a, x, y);
}

/* ---- the rows [p0, p1) of a tile: each library hands in its row maximum and
 * its row sums (sum x, sum x^2 of int8 values), the rest is shared ---- */
typedef int32_t (*tsr_rw_max_fn)(const int8_t *x, int32_t n);
typedef void (*tsr_rw_sums_fn)(const int8_t *x, int32_t n, int32_t *s, int32_t *ss);

TSR_RW_INLINE void tsr_rw_softmax_rows(const tsr_softmax_args_t *a, int32_t p0, int32_t p1, tsr_rw_max_fn row_max)
{
    const int32_t n = a->c;
    const int32_t *table = a->table;
    int32_t p, j;
    for (p = p0; p < p1; p++) {
        const int8_t *x = a->in + (size_t)p * n;
        int8_t *y = a->out + (size_t)p * n;
        uint32_t s = 0, s_hi = 0;
        int32_t max;
        tsr_rw_softmax_t k;
        if (a->mode != TSR_SOFTMAX_TABLE) {
            tsr_softmax_deeploy_row(a, x, y);
            continue;
        }
        max = row_max(x, n);
        for (j = 0; j < n; j++) {
            const uint32_t e = (uint32_t)table[max - x[j]];
            s += e;
            s_hi += s < e;
        }
        if (!tsr_rw_softmax_row(a, s, s_hi, &k)) {
            tsr_softmax_args_t one = *a;     /* the reference's 64-bit division */
            one.in = x, one.out = y, one.pixels = 1;
            tsr_softmax(&one, 0, 1);
            continue;
        }
        for (j = 0; j < n; j++)
            y[j] = (int8_t)tsr_rw_softmax_value(&k, (uint32_t)table[max - x[j]], s);
    }
}

TSR_RW_INLINE void tsr_rw_layernorm_rows(const tsr_layernorm_args_t *a, int32_t p0, int32_t p1,
                                         tsr_rw_sums_fn row_sums)
{
    const int32_t n = a->c, off = a->input_offset;
    uint32_t wmax = 0;
    int32_t p, j, fits = a->mode == TSR_LAYERNORM_INT && tsr_rw_requant_fits(a->rq, n);
    if (a->mode == TSR_LAYERNORM_DEEPLOY)
        for (j = 0; j < n; j++) {
            const uint32_t w = a->weight[j] < 0 ? -(uint32_t)a->weight[j] : (uint32_t)a->weight[j];
            wmax = w > wmax ? w : wmax;
        }
    for (p = p0; p < p1; p++) {
        const int8_t *x = a->in + (size_t)p * n;
        int8_t *y = a->out + (size_t)p * n;
        int32_t s = 0, ss = 0;
        tsr_rw_layernorm_t k;
        if (n > 4096 || off < -256 || off > 256) {
            tsr_layernorm_row(a, x, y);     /* sums beyond 32 bits */
            continue;
        }
        row_sums(x, n, &s, &ss);
        if (a->mode == TSR_LAYERNORM_DEEPLOY) {
            tsr_rw_ilayernorm_values(a, x, y, s + n * off, wmax);
            continue;
        }
        /* sum (x + off) and sum (x + off)^2: |x + off| <= 384, n <= 4096 */
        if (!fits || !tsr_rw_layernorm_row(a, s + n * off, ss + 2 * off * s + n * off * off, &k)) {
            tsr_layernorm_row(a, x, y);
            continue;
        }
        tsr_rw_layernorm_values(a, &k, x, y);
    }
}

#endif /* TESSERA_ROWWISE_H */
