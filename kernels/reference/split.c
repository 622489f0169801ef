/*
 * Split reductions (tessera.tiler: one output's reduction does not fit the
 * tile level): a step adds one chunk of input channels' products into the
 * output tile's int32 accumulators; the first chunk starts from the bias,
 * the last requantizes into the output tile. The sums are the unsplit
 * kernels' (int32 addition in another order: the same value), so the
 * output is bit-exact with them and the golden model.
 *
 * conv2d and pointwise: conv.in is the chunk's input box [in_h][in_w][kc],
 * weights [out_c][kh][kw][kc]; linear: the code generator sets kh, kw to
 * the input's h, w (weights [out_c][in_h][in_w][kc]), a 1x1 output.
 * Padded taps are skipped (their (x + off) is 0 in the unsplit kernels).
 * Each core takes a share of the tile's pixels, or of its channels when it
 * has one pixel.
 */
#include "ref_common.h"

static void split_pixel(const tsr_split_args_t *s, int32_t p, int32_t c0, int32_t c1)
{
    const tsr_conv_args_t *a = s->conv;
    const int32_t kc = a->in_c, off = a->input_offset;
    const int32_t dh = a->dh > 1 ? a->dh : 1, dw = a->dw > 1 ? a->dw : 1;
    const int32_t oy = p / a->out_w, ox = p % a->out_w;
    int32_t c, ky, kx, k;
    for (c = c0; c < c1; c++) {
        const size_t i = (size_t)p * a->out_c + c;
        int32_t acc = s->first ? (a->bias ? a->bias[c] : 0) : s->acc[i];
        for (ky = 0; ky < a->kh; ky++) {
            const int32_t iy = oy * a->sh - a->pad_t + ky * dh;
            if (iy < 0 || iy >= a->in_h)
                continue;
            for (kx = 0; kx < a->kw; kx++) {
                const int32_t ix = ox * a->sw - a->pad_l + kx * dw;
                const int8_t *x, *w;
                if (ix < 0 || ix >= a->in_w)
                    continue;
                x = a->in + ((size_t)iy * a->in_w + ix) * kc;
                w = a->weights + (((size_t)c * a->kh + ky) * a->kw + kx) * kc;
                for (k = 0; k < kc; k++)
                    acc += (x[k] + off) * w[k];
            }
        }
        if (s->last)
            tsr_ref_store(a->out, i, acc, a->rq, c);
        else
            s->acc[i] = acc;
    }
}

void tsr_split_step(const tsr_split_args_t *s, int core, int ncores)
{
    const tsr_conv_args_t *a = s->conv;
    const int32_t pixels = a->out_h * a->out_w;
    int32_t p, b, e;
    if (pixels == 1) {
        tsr_ref_share(a->out_c, core, ncores, &b, &e);
        if (b < e)
            split_pixel(s, 0, b, e);
        return;
    }
    tsr_ref_share(pixels, core, ncores, &b, &e);
    for (p = b; p < e; p++)
        split_pixel(s, p, 0, a->out_c);
}
