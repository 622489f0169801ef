/*
 * Elementwise add of two same-shape int8 tiles (residual connections):
 *   acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * in 64 bits (in_mul goes up to 2**30), requantized per tensor. Each core
 * takes a contiguous run of ceil(n / ncores) elements.
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"

void pnn_add(const tsr_add_args_t *a, int core, int ncores)
{
    const int64_t ma = a->in_mul[0], mb = a->in_mul[1];
    const int32_t oa = a->in_offset[0], ob = a->in_offset[1];
    int32_t i, i0, i1;

    pnn_chunk(a->n, 1, core, ncores, &i0, &i1);
    if (a->rq) {
        int8_t *out = (int8_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int8_t)tsr_requantize((a->a[i] + oa) * ma + (a->b[i] + ob) * mb, a->rq, 0);
    } else {
        int32_t *out = (int32_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int32_t)((a->a[i] + oa) * ma + (a->b[i] + ob) * mb);
    }
}
