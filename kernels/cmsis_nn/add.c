/*
 * Elementwise add with tessera's semantics (CMSIS-NN's arm_elementwise_add_s8
 * rescales each input separately, with its own rounding, so it is not
 * used):
 *     acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * in 64 bits (smull + smlal), then the per-tensor requantization with its
 * constants worked out once per tile instead of once per element.
 */
#include <stddef.h>

#include "tessera/cmsis_nn.h"

void tsr_cmsis_add(const tsr_add_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    const tsr_requant_t *rq = a->rq;
    /* Requant.divisor (NEMO's 2^d - 1): the reference kernel's tsr_requantize */
    if (rq == NULL || rq->shift[0] < 0 || rq->shift[0] > 62 || rq->divisor > 1) {
        tsr_add(a, 0, 1);
        return;
    }
    const int32_t ma = a->in_mul[0], mb = a->in_mul[1], oa = a->in_offset[0], ob = a->in_offset[1];
    const int64_t mul = rq->mul[0];
    const int32_t shift = rq->shift[0];
    const int64_t bias = (rq->add ? rq->add[0] : 0) +
                         (rq->rounding == TSR_ROUND_HALF_UP && shift > 0 ? (int64_t)1 << (shift - 1) : 0);
    const int32_t zp = rq->zero_point, lo = rq->lo, hi = rq->hi;
    int8_t *out = (int8_t *)a->out;
    for (int32_t i = 0; i < a->n; i++) {
        int64_t acc = (int64_t)(a->a[i] + oa) * ma + (int64_t)(a->b[i] + ob) * mb;
        int64_t v = (mul == 1 ? acc : acc * mul) + bias;
        /* a shift of 32 or more only needs the high word */
        int32_t y = shift >= 32 ? (int32_t)(v >> 32) >> (shift - 32) : (int32_t)(v >> shift);
        if (shift < 32 && (v >> shift) != y)   /* beyond 32 bits: saturate, the clamp below decides */
            y = v < 0 ? INT32_MIN / 2 : INT32_MAX / 2;
        y += zp;
        out[i] = (int8_t)(y < lo ? lo : y > hi ? hi : y);
    }
}
