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
    if (a->weight_offset) {     /* asymmetric uint8 weights: the plain loop */
        const int32_t K = a->in_h * a->in_w * a->in_c, off = a->input_offset, woff = a->weight_offset;
        int32_t c, k;
        for (c = c0; c < c1; c++) {
            const int8_t *w = a->weights + (size_t)c * K;
            int32_t acc = a->bias ? a->bias[c] : 0;
            for (k = 0; k < K; k++)
                acc += (a->in[k] + off) * (w[k] + woff);
            tsr_ref_store(a->out, (size_t)c, acc, a->rq, c);
        }
        return;
    }
    tsr_ref_matmul(a->in, NULL, a->in_h * a->in_w * a->in_c, a->weights, a->bias,
                   c0, c1, a->input_offset, a->out, 0, 0, a->rq);
}
