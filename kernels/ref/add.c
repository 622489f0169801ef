/*
 * Reference elementwise add of two same-shape int8 tiles:
 *   acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * in 64 bits. Each core computes a contiguous run of ceil(n / ncores)
 * elements.
 */
#include "ref_common.h"

/* tsr_requantize with a 64-bit accumulator. The header's tsr_requantize
 * takes int32, but the add's accumulator does not fit in 32 bits: the
 * frontend gives in_mul up to 2**30 (common_shift_multipliers) and moves the
 * scale into the requantization's shift. Same formula, per tensor. */
static int32_t requant64(int64_t acc, const tsr_requant_t *rq)
{
    int32_t shift = rq->shift[0];
    int64_t v = acc * rq->mul[0] + (rq->add ? rq->add[0] : 0);
    if (rq->rounding == TSR_ROUND_HALF_UP && shift > 0)
        v += (int64_t)1 << (shift - 1);
    v = (v >> shift) + rq->zero_point;
    if (v < rq->lo) v = rq->lo;
    if (v > rq->hi) v = rq->hi;
    return (int32_t)v;
}

void tsr_add(const tsr_add_args_t *a, int core, int ncores)
{
    const int64_t ma = a->in_mul[0], mb = a->in_mul[1];
    const int32_t oa = a->in_offset[0], ob = a->in_offset[1];
    int32_t i, i0, i1;

    tsr_ref_share(a->n, core, ncores, &i0, &i1);
    if (a->rq) {
        int8_t *out = (int8_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int8_t)requant64((a->a[i] + oa) * ma + (a->b[i] + ob) * mb, a->rq);
    } else {
        /* int32 output: the accumulator must fit (the golden model checks) */
        int32_t *out = (int32_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int32_t)((a->a[i] + oa) * ma + (a->b[i] + ob) * mb);
    }
}
