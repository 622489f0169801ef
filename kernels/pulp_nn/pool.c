/*
 * Pooling on HWC int8 tiles, c channels in and out. Work split: output
 * pixels per core, or channels when that is more even (a global pool has
 * one pixel), see pnn_split.
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"

/* Window maxima; padded positions are skipped (they never win). */
void pnn_maxpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c;
    int32_t p, p0, p1, c0, c1, c, ky, kx;

    pnn_split(a->out_h * a->out_w, C, 1, 1, core, ncores, &p0, &p1, &c0, &c1);
    for (p = p0; p < p1 && c0 < c1; p++) {
        const int32_t iy0 = (p / a->out_w) * a->sh - a->pad_t, ix0 = (p % a->out_w) * a->sw - a->pad_l;
        int32_t ky0, ky1, kx0, kx1;
        int8_t *o = a->out + (size_t)p * C;
        tsr_window(iy0, a->kh, a->in_h, &ky0, &ky1);
        tsr_window(ix0, a->kw, a->in_w, &kx0, &kx1);
        for (c = c0; c < c1; c++)
            o[c] = INT8_MIN;   /* every window holds an input: exact */
        for (ky = ky0; ky < ky1; ky++)
            for (kx = kx0; kx < kx1; kx++) {
                const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (size_t)(ix0 + kx)) * C;
                for (c = c0; c < c1; c++)
                    if (x[c] > o[c])
                        o[c] = x[c];
            }
    }
}

/* acc = sum(x + input_offset) over the window (no padding), requantized
 * (the multiplier carries 1 / window size). */
void pnn_avgpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c, kh = a->kh, kw = a->kw;
    const int32_t area_off = kh * kw * a->input_offset;
    const size_t row = (size_t)a->in_w * C;
    int32_t p, p0, p1, c0, c1, c, ky, kx;
    pnn_rq_t rq = {0};

    pnn_split(a->out_h * a->out_w, C, 1, 1, core, ncores, &p0, &p1, &c0, &c1);
    if (a->rq && !a->rq->per_channel)
        rq = pnn_rq_channel(a->rq, 0);
    for (p = p0; p < p1 && c0 < c1; p++) {
        const int8_t *x0 = a->in + (size_t)(p / a->out_w) * a->sh * row + (size_t)(p % a->out_w) * a->sw * C;
        int8_t *o = a->out + (size_t)p * C;
        for (c = c0; c < c1; c++) {
            int32_t acc = area_off;
            for (ky = 0; ky < kh; ky++) {
                const int8_t *x = x0 + (size_t)ky * row + c;
                for (kx = 0; kx < kw; kx++, x += C)
                    acc += *x;
            }
            if (a->rq) {
                if (a->rq->per_channel)
                    rq = pnn_rq_channel(a->rq, c);
                o[c] = pnn_rq_apply(acc, &rq);
            } else {
                /* not a layer the IR makes (avgpool requantizes); saturate */
                o[c] = (int8_t)(acc < INT8_MIN ? INT8_MIN : acc > INT8_MAX ? INT8_MAX : acc);
            }
        }
    }
}
