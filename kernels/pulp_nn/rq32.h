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
    if (!rq || rq->add || rq->neg_mul || rq->rounding != TSR_ROUND_HALF_UP || rq->elem.plane)
        return 0;
    return xp_rq_at(rq, rq->per_channel ? c : 0, q);
}

static inline int8_t xp_rq(int32_t acc, const xp_rq_t *q)
{
    int32_t y = ((int32_t)(((int64_t)acc * q->mul) >> 32) + q->round) >> q->shift;
    return (int8_t)(xp_min(xp_max(y, q->lo), q->hi) + q->zero_point);
}

#endif /* TESSERA_PNN_RQ32_H */
