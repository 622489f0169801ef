/*
 * pointwise (1x1, stride 1, no padding) conv (PULP-NN's pointwise kernels):
 * HWC input tile, weights [out_c][in_c]. Every input pixel is already an
 * im2col row, so this is the 4x2 matmul straight on the input: no scratch.
 *
 * Work split: output pixels (rows, in raster order) per core, or output
 * channels in fours when that is more even (the 4x4-pixel layers at the
 * end of a network), see pnn_split.
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"   /* the SIMD path, matmul_xpulp.c */
#endif

void pnn_pointwise(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t in_c = a->in_c, out_c = a->out_c, off = a->input_offset;
    int32_t p, p_end, c0, c1;

#ifdef TSR_ISA_XPULPV2
    /* a tie by channels: a core's few channel blocks each walk every pixel
     * (the Xpulp path's set-up is per block); the portable path's per
     * pixel pair (pnn_matmul's per call) */
    pnn_split(a->out_h * a->out_w, out_c, 2, 4, 1, core, ncores, &p, &p_end, &c0, &c1);
#else
    pnn_split(a->out_h * a->out_w, out_c, 2, 4, 0, core, ncores, &p, &p_end, &c0, &c1);
#endif
    if (c0 >= c1)
        return;
#ifdef TSR_ISA_XPULPV2
    /* whole 4-channel blocks there; what is left (or everything) here */
    c0 = pnn_pointwise_xpulp(a, p, p_end, c0, c1);
    if (c0 >= c1)
        return;
#endif
    for (; p + 1 < p_end; p += 2)
        pnn_matmul(a->in + (size_t)p * in_c, a->in + (size_t)(p + 1) * in_c, in_c, a->weights,
                   a->bias, c0, c1, off, a->out, (size_t)p * out_c, (size_t)(p + 1) * out_c, a->rq);
    if (p < p_end)
        pnn_matmul(a->in + (size_t)p * in_c, NULL, in_c, a->weights, a->bias, c0, c1, off,
                   a->out, (size_t)p * out_c, 0, a->rq);
}

/* The rest of a channel-major output: channels [c0, c1) of pixels [p0, p1),
 * one dot product each (the 4-channel blocks' pixel pairs are the Xpulp
 * path's; the portable build takes everything here). */
static void pointwise_chw_rest(const tsr_conv_args_t *a, int32_t p0, int32_t p1, int32_t c0, int32_t c1)
{
    const int32_t K = a->in_c, P = a->out_h * a->out_w, off = a->input_offset;
    int32_t c, p, k;
    for (c = c0; c < c1; c++) {
        const int8_t *w = a->weights + (size_t)c * K;
        pnn_rq_t rq = {0};
        if (a->rq)
            rq = pnn_rq_channel(a->rq, c);
        for (p = p0; p < p1; p++) {
            const int8_t *x = a->in + (size_t)p * K;
            int32_t acc = a->bias ? a->bias[c] : 0;
            for (k = 0; k < K; k++)
                PNN_MAC(acc, x[k] + off, w[k]);
            pnn_store(a->out, (size_t)c * P + p, acc, &rq, a->rq);
        }
    }
}

void pnn_pointwise_chw(const tsr_conv_args_t *a, int core, int ncores)
{
    int32_t p, p_end, c0, c1;
    pnn_split(a->out_h * a->out_w, a->out_c, 2, 4, 1, core, ncores, &p, &p_end, &c0, &c1);
    if (c0 >= c1)
        return;
#ifdef TSR_ISA_XPULPV2
    {
        int32_t done, c = pnn_pointwise_xpulp_chw(a, p, p_end, c0, c1, &done);
        if (c > c0 && done < p_end)   /* the blocks' odd last pixel */
            pointwise_chw_rest(a, done, p_end, c0, c);
        c0 = c;
    }
#endif
    pointwise_chw_rest(a, p, p_end, c0, c1);
}
