/*
 * Reference pointwise (1x1, stride 1, no padding) conv: HWC input tile,
 * weights [out_c][in_c]. Every input pixel is already an im2col row, so this
 * is the matmul alone, no scratch. Each core computes a contiguous run of
 * ceil(pixels / ncores) pixels.
 */
#include "ref_common.h"

void tsr_pointwise(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t in_c = a->in_c, out_c = a->out_c;
    int32_t p, p0, p1;

    /* out_h * out_w == in_h * in_w for a 1x1 stride-1 conv */
    tsr_ref_share(a->out_h * a->out_w, core, ncores, &p0, &p1);
    for (p = p0; p + 1 < p1; p += 2)
        tsr_ref_matmul(a->in + (size_t)p * in_c, a->in + (size_t)(p + 1) * in_c, in_c,
                       a->weights, a->bias, 0, out_c, a->input_offset,
                       a->out, (size_t)p * out_c, (size_t)(p + 1) * out_c, a->rq);
    if (p < p1)
        tsr_ref_matmul(a->in + (size_t)p * in_c, NULL, in_c,
                       a->weights, a->bias, 0, out_c, a->input_offset,
                       a->out, (size_t)p * out_c, 0, a->rq);
}
