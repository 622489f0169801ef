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
 * the input's h, w (weights [out_c][in_h][in_w][kc], the input's order: one
 * run of in_h * in_w * kc), a 1x1 output. Padded taps are skipped (their
 * (x + off) is 0 in the unsplit kernels). Each core takes a share of the
 * tile's pixels, or of its channels when it has one pixel.
 */
#include "ref_common.h"

/* acc[0..m) += the run of n inputs (plus off) times m channels' weights,
 * whose rows are `block` apart: 4 channels share each input load. */
static inline void split_mac(int32_t *acc, int32_t m, const int8_t *x, const int8_t *w0, int32_t block,
                             int32_t n, int32_t off)
{
    int32_t k, q;
    if (m == 4) {
        const int8_t *w1 = w0 + block, *w2 = w1 + block, *w3 = w2 + block;
        int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
        for (k = 0; k < n; k++) {
            const int32_t v = x[k] + off;
            a0 += v * w0[k];
            a1 += v * w1[k];
            a2 += v * w2[k];
            a3 += v * w3[k];
        }
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        return;
    }
    for (q = 0; q < m; q++) {
        const int8_t *w = w0 + (size_t)q * block;
        int32_t a = acc[q];
        for (k = 0; k < n; k++)
            a += (x[k] + off) * w[k];
        acc[q] = a;
    }
}

/* Output channels [c0, c1) of pixel p, 4 at a time. */
static void split_pixel(const tsr_split_args_t *s, int32_t p, int32_t c0, int32_t c1)
{
    const tsr_conv_args_t *a = s->conv;
    const int32_t kc = a->in_c, off = a->input_offset, block = a->kh * a->kw * kc;
    const int32_t dh = a->dh > 1 ? a->dh : 1, dw = a->dw > 1 ? a->dw : 1;
    const int32_t oy = p / a->out_w, ox = p % a->out_w;
    /* a linear layer's window: the whole input in the weights' order */
    const int whole = a->kh == a->in_h && a->kw == a->in_w && a->out_h == 1 && a->out_w == 1 &&
                      !(a->pad_t | a->pad_l | a->pad_b | a->pad_r);
    const size_t o = (size_t)p * a->out_c;
    int32_t c, j, ky, kx, acc[4];
    for (c = c0; c < c1; c += 4) {
        const int32_t m = c1 - c < 4 ? c1 - c : 4;
        const int8_t *w = a->weights + (size_t)c * block;
        for (j = 0; j < m; j++)
            acc[j] = s->first ? (a->bias ? a->bias[c + j] : 0) : s->acc[o + c + j];
        if (whole) {
            split_mac(acc, m, a->in, w, block, block, off);
        } else {
            for (ky = 0; ky < a->kh; ky++) {
                const int32_t iy = oy * a->sh - a->pad_t + ky * dh;
                if (iy < 0 || iy >= a->in_h)
                    continue;
                for (kx = 0; kx < a->kw; kx++) {
                    const int32_t ix = ox * a->sw - a->pad_l + kx * dw;
                    if (ix < 0 || ix >= a->in_w)
                        continue;
                    split_mac(acc, m, a->in + ((size_t)iy * a->in_w + ix) * kc, w + (ky * a->kw + kx) * kc,
                              block, kc, off);
                }
            }
        }
        for (j = 0; j < m; j++) {
            if (s->last)
                tsr_ref_store(a->out, o + c + j, acc[j], a->rq, c + j);
            else
                s->acc[o + c + j] = acc[j];
        }
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
