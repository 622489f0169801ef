/*
 * Reference elementwise add of two same-shape tiles (int8, or int32
 * accumulators):
 *   acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * in 64 bits. Each core computes a contiguous run of ceil(n / ncores)
 * elements. The requantization is per tensor, or, when out_c is set, per
 * channel (element i is channel i % out_c) or per element.
 */
#include "ref_common.h"

static inline int64_t add_acc(const tsr_add_args_t *a, int32_t i)
{
    int64_t x, y;
    if (a->in_int32) {
        x = ((const int32_t *)(const void *)a->a)[i];
        y = ((const int32_t *)(const void *)a->b)[i];
    } else {
        x = a->a[i];
        y = a->b[i];
    }
    if (a->in_shift[0])   /* TFLite's ADD: each input rescaled after a left shift of 20 */
        return (int64_t)tsr_tfl_multiply((int32_t)((x + a->in_offset[0]) * (1 << 20)), a->in_mul[0], a->in_shift[0])
             + tsr_tfl_multiply((int32_t)((y + a->in_offset[1]) * (1 << 20)), a->in_mul[1], a->in_shift[1]);
    return (x + a->in_offset[0]) * a->in_mul[0] + (y + a->in_offset[1]) * a->in_mul[1];
}

void tsr_add(const tsr_add_args_t *a, int core, int ncores)
{
    int32_t i, i0, i1;

    tsr_ref_share(a->n, core, ncores, &i0, &i1);
    if (!a->rq) {
        /* int32 output: the accumulator must fit (the golden model checks) */
        int32_t *out = (int32_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int32_t)add_acc(a, i);
    } else if (!a->out_c) {
        int8_t *out = (int8_t *)a->out;
        for (i = i0; i < i1; i++)
            out[i] = (int8_t)tsr_requantize(add_acc(a, i), a->rq, 0);
    } else {
        int8_t *out = (int8_t *)a->out;
        for (i = i0; i < i1; i++) {
            int32_t p = i / a->out_c;
            out[i] = (int8_t)tsr_requantize_at(add_acc(a, i), a->rq, p / a->out_w, p % a->out_w, i % a->out_c);
        }
    }
}
