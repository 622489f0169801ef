/*
 * The usual requantization in 32-bit arithmetic, exactly, for the Xpulp
 * paths: round half up, no additive term and a shift s of 33 or more (a
 * Q31 multiplier scaled down: every standard QDQ layer). Then
 *   (acc * mul + 2^(s-1)) >> s  ==  (mulh(acc, mul) + 2^(s-33)) >> (s-32)
 * because the rounding term is a multiple of 2^32 (it only adds to the
 * high word of the 64-bit sum) and an arithmetic shift of the high word
 * floors as the 64-bit shift does. Other layers keep pnn_rq_apply.
 */
#ifndef TESSERA_PNN_RQ32_H
#define TESSERA_PNN_RQ32_H

#include "pnn_common.h"
#include "xpulp.h"

typedef struct {
    int32_t mul, round, shift, lo, hi, zero_point;
} xp_rq_t;

/* Whether rq is the usual kind (round half up, no additive term, one
 * multiplier for either sign, per channel or tensor): its channels' shifts
 * are then all that decides. */
static inline int xp_rq_usual(const tsr_requant_t *rq)
{
    return rq && !rq->add && !rq->neg_mul && rq->rounding == TSR_ROUND_HALF_UP && !rq->elem.plane;
}

/* The constants at index k of rq's arrays; 0 when its shift is under 33. */
static inline int xp_rq_at(const tsr_requant_t *rq, int32_t k, xp_rq_t *q)
{
    const int32_t s = rq->shift[k];
    if (s < 33 || s > 63)
        return 0;
    q->mul = rq->mul[k];
    q->round = (int32_t)1 << (s - 33);
    q->shift = s - 32;
    q->lo = rq->lo - rq->zero_point;
    q->hi = rq->hi - rq->zero_point;
    q->zero_point = rq->zero_point;
    return 1;
}

/* Channel c's constants; 0 when it needs the general requantization. */
static inline int xp_rq_channel(const tsr_requant_t *rq, int32_t c, xp_rq_t *q)
{
    if (!xp_rq_usual(rq))
        return 0;
    return xp_rq_at(rq, rq->per_channel ? c : 0, q);
}

static inline int8_t xp_rq(int32_t acc, const xp_rq_t *q)
{
    int32_t y = ((int32_t)(((int64_t)acc * q->mul) >> 32) + q->round) >> q->shift;
    return (int8_t)(xp_min(xp_max(y, q->lo), q->hi) + q->zero_point);
}

/* One 4-channel block's constants for the asm blocks' requantization
 * (xpulp.h, XP_RQ8): mulh, then p.addRN with the zero point folded,
 *   mulh  t = (acc * mul) >> 32
 *   p.addRN t = (t + (zp << (s - 32)) + 2^(s - 33)) >> (s - 32)
 * exactly tessera's round half up for shifts s of 33 to 54: zp << (s - 32)
 * is a multiple of 2^(s - 32), so adding it before the floor shift adds zp
 * after it, and |t| <= 2^30, |zp << 22| <= 2^29 keep the 32-bit sum from
 * wrapping. Then the clamp (lo, hi: the zero point included). */
typedef struct {
    int32_t b[4];             /* bias + off * sum(w) */
    int32_t q[4][3];          /* per channel: mul, s - 32, zp << (s - 32) */
    int32_t lo, hi;
} xp_rec4_t;

/* Channel k's (mul, s - 32, zp << (s - 32)) into q; 0 when its shift is
 * outside [33, 54]. rq must be xp_rq_usual. */
static inline int xp_rec_rq(const tsr_requant_t *rq, int32_t k, int32_t *q)
{
    const int32_t sh = rq->shift[k] - 32;
    if (sh < 1 || sh > 22)
        return 0;
    q[0] = rq->mul[k];
    q[1] = sh;
    q[2] = (int32_t)((uint32_t)rq->zero_point << sh);
    return 1;
}

/* the record of a->weights' channels [c, c + 4), rows of K bytes
 * (matmul_xpulp.c) */
int pnn_xp_record4(const tsr_conv_args_t *a, int32_t c, int32_t K, int ok, xp_rec4_t *r);

#endif /* TESSERA_PNN_RQ32_H */
