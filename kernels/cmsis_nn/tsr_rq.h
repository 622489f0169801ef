/*
 * Requantization of the Cortex-M kernels, one template for every form
 * tessera imports, the form chosen at build time (the code generator picks
 * the kernel entry point, site_scons/tessera/codegen/libraries/cmsis_nn.py):
 *
 *   TSR_RQ_HU    half up, no additive term: ONNX Runtime's QDQ layers, given
 *                as CMSIS-NN's multiplier and left shift (s = 31 - shift)
 *   TSR_RQ_TFL   TFLite's two roundings (MultiplyByQuantizedMultiplier) on a
 *                doubled accumulator (the kernels compute 2 * acc: doubled
 *                columns or filter, doubled bias; |acc| < 2^30, which the
 *                code generator proves from the weights and bias)
 *   TSR_RQ_TFLW  TSR_RQ_TFL for shifts up to 62 (TFLite's converter gives
 *                channels of tiny or zero scale shifts near 62 and
 *                multiplier 0): the zero point added after the shift
 *   TSR_RQ_TFLX  the same on the plain accumulator (any int32)
 *   TSR_RQ_K64   floor or half up with an additive term: DORY's and
 *                Deeploy's BN-folded integer requantization
 *   TSR_RQ_ANY   anything else (Requant.divisor, shifts out of the fast
 *                range): tsr_requantize, per element
 *
 * Every fast form is one 64-bit multiply-add and a shift of its high word,
 * with the rounding constant, the zero point and (TFLite) the sign rule
 * folded into per-channel constants (tsr_rqc_t, worked out per channel, no
 * scratch):
 *
 *   HU (33 <= s <= 54):  y = smmla(acc, m, h) >> (s - 32),
 *       h = (1 + 2 zp) << (s - 33): floor((acc m + 2^(s-1) + zp 2^s) / 2^s)
 *   TFL (32 <= s <= 54, m >= 0): y = (smmlar(2acc, m, h) + (acc < 0 ? -1 : 0)) >> (s - 31),
 *       h = (1 + 2 zp) << (s - 32)
 *   TFLW (31 <= s <= 62, m >= 0): y = ((smmlar(2acc, m, 2^(s-32)) + (acc < 0 && s > 31 ? -1 : 0)) >> (s - 31)) + zp
 *       (s = 31 has no second rounding: SRDHM alone, smmlar(2acc, m, 0))
 *   TFLX (32 <= s <= 54, m >= 0): lo:hi = 2^30 - [acc < 0] 2^31 + h' 2^32, smlal, hi >> (s - 32),
 *       h' = (1 + 2 zp) << (s - 33) (s = 32: see tsr_rqc)
 *   K64 (s <= 54 after normalizing s < 32 by m << (32 - s)):
 *       lo:hi = add + R + zp 2^s, smlal, hi >> (s - 32)
 *
 * Why TFLite's two roundings are one: SRDHM(x, m) = floor((x m + 2^30) / 2^31)
 * for any sign (the nudge 1 - 2^30 below zero with C's division toward
 * zero is that floor), RDBPOT(y, r) = floor((y + 2^(r-1) - [y < 0]) / 2^r),
 * nested floors of integer divisions compose, and for r >= 1 and m >= 0,
 * [y < 0] may be replaced by [x < 0] (x < 0 with y >= 0 means y = 0, which
 * rounds to 0 either way). So with s = 31 + r (the IR's shift):
 *   y + zp = floor((x m + 2^30 - [x < 0] 2^31 + 2^(s-1) + zp 2^s) / 2^s),
 * doubled: floor((2x m + 2^31 + (1 + 2zp) 2^s - [x < 0] 2^32) / 2^(s+1)),
 * whose high word is smmlar(2x, m, (1 + 2zp) << (s - 32)) - [x < 0].
 * tests/test_cmsis_nn.py checks each form against the golden model.
 */
#ifndef TSR_RQ_H
#define TSR_RQ_H

#include <stdint.h>

#include "tessera/kernels.h"
#include "tsr_dsp.h"

enum { TSR_RQ_HU = 0, TSR_RQ_TFL = 1, TSR_RQ_TFLX = 2, TSR_RQ_K64 = 3, TSR_RQ_ANY = 4, TSR_RQ_TFLW = 5 };

/* Where a kernel's requantization comes from: CMSIS-NN's arrays (HU; ANY
 * when a shift is out of the fast range) or tessera's tsr_requant_t; the
 * arrays start at the kernel's first channel (tsr_rqp_at moves them). */
typedef struct {
    const int32_t *mul;
    const int32_t *shift32;     /* CMSIS-NN's left shifts (s = 31 - shift), or NULL */
    const int8_t *shift8;       /* tessera's right shifts, or NULL */
    const int32_t *add;         /* tessera's additive terms, or NULL */
    const tsr_requant_t *rq;    /* tessera's, or NULL (ANY's source) */
    int32_t c0;                 /* the arrays' first channel in rq's (ANY) */
    int32_t step;               /* 1: an array entry per channel; 0: entry 0 for all */
    int32_t half_up;            /* K64: round half up, else floor */
    int32_t zp, lo, hi;
} tsr_rqp_t;

/* One channel's constants for the fast forms. */
typedef struct {
    int32_t m, h, l, sh;
    int32_t g;                  /* TFLW: the sign rule's mask (0 for s = 31) */
} tsr_rqc_t;

TSR_INLINE tsr_rqp_t tsr_rqp_cmsis(const int32_t *mul, const int32_t *shift, int32_t zp, int32_t lo, int32_t hi)
{
    tsr_rqp_t p;
    p.mul = mul;
    p.shift32 = shift;
    p.shift8 = NULL;
    p.add = NULL;
    p.rq = NULL;
    p.c0 = 0;
    p.step = 1;
    p.half_up = 1;
    p.zp = zp;
    p.lo = lo;
    p.hi = hi;
    return p;
}

TSR_INLINE tsr_rqp_t tsr_rqp_tessera(const tsr_requant_t *rq)
{
    tsr_rqp_t p;
    p.mul = rq->mul;
    p.shift32 = NULL;
    p.shift8 = rq->shift;
    p.add = rq->add;
    p.rq = rq;
    p.c0 = 0;
    p.step = rq->per_channel ? 1 : 0;
    p.half_up = rq->rounding == TSR_ROUND_HALF_UP;
    p.zp = rq->zero_point;
    p.lo = rq->lo;
    p.hi = rq->hi;
    return p;
}

/* p from channel c0 on (a block of a tile's channels) */
TSR_INLINE tsr_rqp_t tsr_rqp_at(tsr_rqp_t p, int32_t c0)
{
    const int32_t i = c0 * p.step;
    p.mul += i;
    if (p.shift32)
        p.shift32 += i;
    if (p.shift8)
        p.shift8 += i;
    if (p.add)
        p.add += i;
    p.c0 += c0;
    return p;
}

TSR_INLINE int32_t tsr_shl(int32_t v, int32_t n)
{
    return (int32_t)((uint32_t)v << n);
}

/* the IR's right shift of channel c */
TSR_INLINE int32_t tsr_rq_s(const tsr_rqp_t *p, int32_t c)
{
    const int32_t i = c * p->step;
    return p->shift32 ? 31 - p->shift32[i] : p->shift8[i];
}

/* K64's constant add + R + zp 2^s (s: the IR's shift) */
TSR_INLINE int64_t tsr_rq_k64(const tsr_rqp_t *p, int32_t i, int32_t s)
{
    return (int64_t)(p->add ? p->add[i] : 0) + (p->half_up && s > 0 ? (int64_t)1 << (s - 1) : 0) +
           (int64_t)p->zp * ((int64_t)1 << s);
}

/* Whether channels [0, n) fit `mode`'s fast form. */
static inline int tsr_rq_fast(const tsr_rqp_t *p, int mode, int32_t n)
{
    if (mode == TSR_RQ_ANY)
        return 0;
    if (p->rq && (p->rq->divisor > 1 || p->rq->elem.plane))
        return 0;
    const int32_t count = p->step ? n : 1;
    for (int32_t c = 0; c < count; c++) {
        const int32_t s = tsr_rq_s(p, c), mul = p->mul[c];
        if (mode == TSR_RQ_HU && (s < 33 || s > 54))
            return 0;
        if ((mode == TSR_RQ_TFL || mode == TSR_RQ_TFLX) && (s < 32 || s > 54 || mul < 0))
            return 0;
        if (mode == TSR_RQ_TFLW && (s < 31 || s > 62 || mul < 0))
            return 0;
        if (mode == TSR_RQ_K64) {
            if (s < 0 || s > 54)
                return 0;
            if (s < 32) {
                /* s is raised to 32 with the multiplier and the constant:
                 * both must keep their sign bits */
                const int64_t k = tsr_rq_k64(p, c, s), lim = (int64_t)1 << (30 + s);
                if ((s == 0 && mul != 0) || (s > 0 && (mul >= (1 << (s - 1)) || mul < -(1 << (s - 1)))) ||
                    k >= lim || k < -lim)
                    return 0;
            }
        }
    }
    return 1;
}

/* The mode a kernel runs: `mode` when every channel of [0, n) fits its fast
 * form, else TSR_RQ_ANY. TSR_RQ_TFL doubles the accumulators, so it also
 * needs |acc| < 2^30: |bias| + mac_bound below it, mac_bound bounding
 * |sum (x + offset) w| (k * 128 * (128 + |offset|)). */
static inline int tsr_rq_mode(const tsr_rqp_t *p, int mode, int32_t n, const int32_t *bias, int32_t mac_bound)
{
    if (mode == TSR_RQ_TFL && !tsr_rq_fast(p, mode, n))
        mode = TSR_RQ_TFLW;
    if (!tsr_rq_fast(p, mode, n))
        return TSR_RQ_ANY;
    if (mode == TSR_RQ_TFL || mode == TSR_RQ_TFLW) {
        const int32_t room = (1 << 30) - mac_bound;
        if (mac_bound < 0 || room <= 0)
            return TSR_RQ_ANY;
        for (int32_t c = 0; bias && c < n; c++)
            if (bias[c] >= room || bias[c] <= -room)
                return TSR_RQ_ANY;
    }
    return mode;
}

/* k * 128 * (128 + |offset|), or -1 beyond 2^30 */
static inline int32_t tsr_mac_bound(int32_t k, int32_t offset)
{
    const int64_t b = (int64_t)k * 128 * (128 + (offset < 0 ? -offset : offset));
    return b < ((int64_t)1 << 30) ? (int32_t)b : -1;
}

/* Channel c's constants. */
TSR_INLINE tsr_rqc_t tsr_rqc(const tsr_rqp_t *p, int32_t c, int mode)
{
    tsr_rqc_t r;
    const int32_t i = c * p->step, z21 = 1 + 2 * p->zp;
    r.m = p->mul[i];
    r.l = 0;
    r.g = 0;
    if (mode == TSR_RQ_HU) {
        const int32_t sh = ~p->shift32[i];    /* s - 32 = -1 - shift */
        r.h = tsr_shl(z21, sh - 1);
        r.sh = sh;
    } else if (mode == TSR_RQ_TFL) {
        const int32_t s = p->shift8[i];
        r.h = tsr_shl(z21, s - 32);
        r.sh = s - 31;
    } else if (mode == TSR_RQ_TFLW) {
        const int32_t sh = p->shift8[i] - 31;
        r.h = (int32_t)((1u << sh) >> 1);
        r.l = p->zp;
        r.sh = sh;
        r.g = sh ? -1 : 0;
    } else if (mode == TSR_RQ_TFLX) {
        /* 2^30 + 2^(s-1) + zp 2^s as lo:hi (the sign rule comes per value) */
        const int32_t s = p->shift8[i];
        r.h = s > 32 ? tsr_shl(z21, s - 33) : p->zp;
        r.l = s > 32 ? 0x40000000 : (int32_t)0xC0000000u;
        r.sh = s - 32;
    } else { /* K64 */
        int32_t s = p->shift8[i];
        int64_t k = tsr_rq_k64(p, i, s);
        if (s < 32) {
            r.m = tsr_shl(r.m, 32 - s);
            k = (int64_t)((uint64_t)k << (32 - s));
            s = 32;
        }
        r.l = (int32_t)(uint32_t)(uint64_t)k;
        r.h = (int32_t)(k >> 32);
        r.sh = s - 32;
    }
    return r;
}

/* lo:hi as a 64-bit value */
TSR_INLINE int64_t tsr_rq_pair(int32_t hi, int32_t lo)
{
    return (int64_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

/* The requantized value (zero point included) of one accumulator. */
TSR_INLINE int32_t tsr_rq_val(int32_t acc, tsr_rqc_t r, int mode)
{
    if (mode == TSR_RQ_HU)
        return tsr_smmla(acc, r.m, r.h) >> r.sh;
    if (mode == TSR_RQ_TFL)
        return (tsr_smmlar(acc, r.m, r.h) + (acc >> 31)) >> r.sh;
    if (mode == TSR_RQ_TFLW)
        return ((tsr_smmlar(acc, r.m, r.h) + ((acc >> 31) & r.g)) >> r.sh) + r.l;
    if (mode == TSR_RQ_TFLX) {
        const int64_t v = (int64_t)acc * r.m + tsr_rq_pair(r.h, r.l) - (acc < 0 ? (int64_t)1 << 31 : 0);
        return (int32_t)(v >> 32) >> r.sh;
    }
    /* K64 */
    return (int32_t)(((int64_t)acc * r.m + tsr_rq_pair(r.h, r.l)) >> 32) >> r.sh;
}

/* The clamp: `full` (a constant where called) is int8's own range, one ssat. */
TSR_INLINE int8_t tsr_rq_clamp(int32_t v, int32_t lo, int32_t hi, int full)
{
    return (int8_t)(full ? tsr_sat8(v) : tsr_clamp(v, lo, hi));
}

/* The slow path (TSR_RQ_ANY), out of line: tessera's requantization of
 * channel c, or CMSIS-NN's arithmetic for CMSIS-NN arrays. acc is the
 * plain accumulator (a doubled one halved by the caller). */
static __attribute__((noinline, unused)) int8_t tsr_rq_any(int32_t acc, const tsr_rqp_t *p, int32_t c)
{
    if (p->rq)
        return (int8_t)tsr_requantize(acc, p->rq, p->c0 + c);
    const int32_t i = c * p->step;
    return (int8_t)tsr_clamp(tsr_rq_apply(acc, tsr_rq_make(p->mul[i], p->shift32[i])) + p->zp, p->lo, p->hi);
}

#endif /* TSR_RQ_H */
