/*
 * Reference pointwise (1x1, stride 1, no padding) conv: HWC input tile,
 * weights [out_c][in_c]. Every input pixel is already an im2col row, so this
 * is the matmul alone, no scratch. Each core computes a contiguous run of
 * ceil(pixels / ncores) pixels.
 */
#include "ref_common.h"

/* Pixels [p0, p1) one output at a time, for parameters per element (a
 * Gemm's full bias matrix, a RequantShift per row) or a weight offset. */
static void pointwise_elem(const tsr_conv_args_t *a, int32_t p0, int32_t p1)
{
    const int32_t in_c = a->in_c, out_c = a->out_c, off = a->input_offset, woff = a->weight_offset;
    int32_t p, c, k;
    for (p = p0; p < p1; p++) {
        const int8_t *x = a->in + (size_t)p * in_c;
        const int32_t oy = p / a->out_w, ox = p % a->out_w;
        for (c = 0; c < out_c; c++) {
            const int8_t *w = a->weights + (size_t)c * in_c;
            int32_t acc = tsr_ref_bias(a, oy, ox, c);
            for (k = 0; k < in_c; k++)
                acc += (x[k] + off) * (w[k] + woff);
            tsr_ref_store_at(a->out, (size_t)p * out_c + c, acc, a->rq, oy, ox, c);
        }
    }
}

void tsr_pointwise(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t in_c = a->in_c, out_c = a->out_c;
    int32_t p, p0, p1;

    /* out_h * out_w == in_h * in_w for a 1x1 stride-1 conv */
    tsr_ref_share(a->out_h * a->out_w, core, ncores, &p0, &p1);
    if (tsr_ref_per_element(a) || a->weight_offset) {
        pointwise_elem(a, p0, p1);
        return;
    }
    for (p = p0; p + 1 < p1; p += 2)
        tsr_ref_matmul(a->in + (size_t)p * in_c, a->in + (size_t)(p + 1) * in_c, in_c,
                       a->weights, a->bias, 0, out_c, a->input_offset,
                       a->out, (size_t)p * out_c, (size_t)(p + 1) * out_c, a->rq);
    if (p < p1)
        tsr_ref_matmul(a->in + (size_t)p * in_c, NULL, in_c,
                       a->weights, a->bias, 0, out_c, a->input_offset,
                       a->out, (size_t)p * out_c, 0, a->rq);
}
