/*
 * Reference elementwise add of two same-shape int8 tiles:
 *   acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * in 64 bits. Each core computes a contiguous run of ceil(n / ncores)
 * elements.
 */
#include "ref_common.h"

void tsr_add(const tsr_add_args_t *a, int core, int ncores)
{
    const int64_t ma = a->in_mul[0], mb = a->in_mul[1];
    const int32_t oa = a->in_offset[0], ob = a->in_offset[1];
    int32_t i, i0, i1;

    tsr_ref_share(a->n, core, ncores, &i0, &i1);
    if (a->rq) {
        int8_t *out = (int8_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int8_t)tsr_requantize((a->a[i] + oa) * ma + (a->b[i] + ob) * mb, a->rq, 0);
    } else {
        /* int32 output: the accumulator must fit (the golden model checks) */
        int32_t *out = (int32_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int32_t)((a->a[i] + oa) * ma + (a->b[i] + ob) * mb);
    }
}
