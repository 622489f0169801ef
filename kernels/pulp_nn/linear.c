/*
 * linear (fully connected): the whole input tile in HWC order times weights
 * [out_c][in_h * in_w * in_c]; the output is 1 x 1 x out_c. One input row,
 * so the cores split the output channels (PULP-NN's linear kernels), in
 * multiples of 4 for the 4x1 blocking.
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"

void pnn_linear(const tsr_conv_args_t *a, int core, int ncores)
{
    int32_t c0, c1;
    pnn_chunk(a->out_c, 4, core, ncores, &c0, &c1);
    if (c0 >= c1)
        return;
    pnn_matmul(a->in, NULL, a->in_h * a->in_w * a->in_c, a->weights, a->bias, c0, c1,
               a->input_offset, a->out, 0, 0, a->rq);
}
