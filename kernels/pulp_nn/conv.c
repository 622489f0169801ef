/*
 * conv2d (PULP-NN's pulp_nn_conv): HWC input tile, weights
 * [out_c][kh][kw][in_c], HWC output.
 *
 * Work split: output pixels (rows, in raster order) per core, or output
 * channels in fours when that is more even (pnn_split). Each core unrolls the receptive fields of two output
 * pixels into its own im2col buffer (scratch, 2 * kh * kw * in_c bytes per
 * core; padding stored as -input_offset so the matmul needs no bounds
 * checks), then runs the 4x2 matmul over its output channels. Without that
 * scratch, or with an offset im2col cannot store, a direct loop computes the
 * same values.
 */
#include <string.h>

#include "pnn_common.h"
#include "tessera/pulp_nn.h"

/* Output pixels [p0, p1) (raster order), channels [c0, c1), summing the
 * valid part of each window directly. */
static void conv_direct(const tsr_conv_args_t *a, int32_t p0, int32_t p1, int32_t c0, int32_t c1)
{
    const int32_t in_c = a->in_c, kh = a->kh, kw = a->kw, off = a->input_offset;
    int32_t p, co, ky, kx, ci;
    pnn_rq_t rq = {0};
    for (p = p0; p < p1; p++) {
        int32_t oy = p / a->out_w, ox = p % a->out_w;
        int32_t iy0 = oy * a->sh - a->pad_t, ix0 = ox * a->sw - a->pad_l, ky0, ky1, kx0, kx1;
        size_t o = (size_t)p * a->out_c;
        tsr_window(iy0, kh, a->in_h, &ky0, &ky1);
        tsr_window(ix0, kw, a->in_w, &kx0, &kx1);
        for (co = c0; co < c1; co++) {
            int32_t acc = a->bias ? a->bias[co] : 0;
            for (ky = ky0; ky < ky1; ky++)
                for (kx = kx0; kx < kx1; kx++) {
                    const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (ix0 + kx)) * in_c;
                    const int8_t *w = a->weights + (((size_t)co * kh + ky) * kw + kx) * in_c;
                    for (ci = 0; ci < in_c; ci++)
                        PNN_MAC(acc, x[ci] + off, w[ci]);
                }
            if (a->rq)
                rq = pnn_rq_channel(a->rq, co);
            pnn_store(a->out, o + co, acc, &rq, a->rq);
        }
    }
}

void pnn_conv2d(const tsr_conv_args_t *a, int core, int ncores)
{
    const int32_t patch = a->kh * a->kw * a->in_c, off = a->input_offset;
    const int32_t ow = a->out_w;
    int32_t p, p_end, c0, c1;
    int8_t *col0, *col1;

    pnn_split(a->out_h * ow, a->out_c, 2, 4, core, ncores, &p, &p_end, &c0, &c1);
    if (p >= p_end || c0 >= c1)
        return;
    if (!a->scratch || a->scratch_bytes < 2 * patch || !pnn_offset_padable(off)) {
        conv_direct(a, p, p_end, c0, c1);
        return;
    }
    col0 = a->scratch + (size_t)core * (size_t)a->scratch_bytes;
    col1 = col0 + patch;
    /* two pixels at a time in raster order (a pair may straddle two rows) */
    for (; p + 1 < p_end; p += 2) {
        tsr_im2col_pixel(a, p / ow, p % ow, col0, (int8_t)-off);
        tsr_im2col_pixel(a, (p + 1) / ow, (p + 1) % ow, col1, (int8_t)-off);
        pnn_matmul(col0, col1, patch, a->weights, a->bias, c0, c1, off, a->out,
                   (size_t)p * a->out_c, (size_t)(p + 1) * a->out_c, a->rq);
    }
    if (p < p_end) {
        tsr_im2col_pixel(a, p / ow, p % ow, col0, (int8_t)-off);
        pnn_matmul(col0, NULL, patch, a->weights, a->bias, c0, c1, off, a->out,
                   (size_t)p * a->out_c, 0, a->rq);
    }
}
