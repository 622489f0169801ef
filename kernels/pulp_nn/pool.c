/*
 * Pooling on HWC int8 tiles, c channels in and out. Work split: output rows
 * per core (pnn_split_rows), else channels (a global pool has one row).
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"

static void share(const tsr_pool_args_t *a, int core, int ncores,
                  int32_t *r0, int32_t *r1, int32_t *c0, int32_t *c1)
{
    if (pnn_split_rows(a->out_h, ncores)) {
        pnn_chunk(a->out_h, 1, core, ncores, r0, r1);
        *c0 = 0;
        *c1 = a->c;
    } else {
        *r0 = 0;
        *r1 = a->out_h;
        pnn_chunk(a->c, 1, core, ncores, c0, c1);
    }
}

/* Window maxima; padded positions are skipped (they never win). */
void pnn_maxpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c;
    int32_t r0, r1, c0, c1, oy, ox, c, ky, kx;

    share(a, core, ncores, &r0, &r1, &c0, &c1);
    if (c0 >= c1)
        return;
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        pnn_window(iy0, a->kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            int8_t *o = a->out + ((size_t)oy * a->out_w + ox) * C;
            pnn_window(ix0, a->kw, a->in_w, &kx0, &kx1);
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
}

/* acc = sum(x + input_offset) over the window (no padding), requantized
 * (the multiplier carries 1 / window size). */
void pnn_avgpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c, kh = a->kh, kw = a->kw;
    const int32_t area_off = kh * kw * a->input_offset;
    const size_t row = (size_t)a->in_w * C;
    int32_t r0, r1, c0, c1, oy, ox, c, ky, kx;
    pnn_rq_t p = {0, 0, 0};

    share(a, core, ncores, &r0, &r1, &c0, &c1);
    if (c0 >= c1)
        return;
    if (a->rq && !a->rq->per_channel)
        p = pnn_rq_channel(a->rq, 0);
    for (oy = r0; oy < r1; oy++) {
        for (ox = 0; ox < a->out_w; ox++) {
            const int8_t *x0 = a->in + (size_t)oy * a->sh * row + (size_t)ox * a->sw * C;
            int8_t *o = a->out + ((size_t)oy * a->out_w + ox) * C;
            for (c = c0; c < c1; c++) {
                int32_t acc = area_off;
                for (ky = 0; ky < kh; ky++) {
                    const int8_t *x = x0 + (size_t)ky * row + c;
                    for (kx = 0; kx < kw; kx++, x += C)
                        acc += *x;
                }
                if (a->rq) {
                    if (a->rq->per_channel)
                        p = pnn_rq_channel(a->rq, c);
                    o[c] = pnn_rq_apply(acc, &p, a->rq);
                } else {
                    /* not a layer the IR makes (avgpool requantizes); saturate */
                    o[c] = (int8_t)(acc < INT8_MIN ? INT8_MIN : acc > INT8_MAX ? INT8_MAX : acc);
                }
            }
        }
    }
}
