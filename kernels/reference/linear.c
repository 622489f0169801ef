/*
 * Reference linear (fully connected) layer: the whole input tile, in HWC
 * order, times weights [out_c][in_h * in_w * in_c]; the output is 1x1xout_c.
 * There is a single input row, so the cores split the output channels:
 * core k computes channels [k * ceil(out_c / ncores), ...).
 */
#include "ref_common.h"

void tsr_linear(const tsr_conv_args_t *a, int core, int ncores)
{
    int32_t c0, c1;
    tsr_ref_share(a->out_c, core, ncores, &c0, &c1);
    if (c0 >= c1)
        return;
    tsr_ref_matmul(a->in, NULL, a->in_h * a->in_w * a->in_c, a->weights, a->bias,
                   c0, c1, a->input_offset, a->out, 0, 0, a->rq);
}
