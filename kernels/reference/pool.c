/*
 * Reference pooling: HWC int8 tiles, c channels in and out. Each core
 * computes output rows [core * ceil(out_h / ncores), ...).
 */
#include "ref_common.h"

/* Window maxima; padded positions are skipped (they never win). No
 * requantization: input and output share their quantization. */
void tsr_maxpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c;
    int32_t r0, r1, oy, ox, c, ky, kx;

    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_ref_window(iy0, a->kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            int8_t *o = a->out + ((size_t)oy * a->out_w + ox) * C;
            tsr_ref_window(ix0, a->kw, a->in_w, &kx0, &kx1);
            /* -128 is a lower bound of any int8, so starting there is exact
             * whenever the window holds at least one input */
            for (c = 0; c < C; c++)
                o[c] = INT8_MIN;
            for (ky = ky0; ky < ky1; ky++) {
                for (kx = kx0; kx < kx1; kx++) {
                    const int8_t *x = a->in + ((size_t)(iy0 + ky) * a->in_w + (size_t)(ix0 + kx)) * C;
                    for (c = 0; c < C; c++)
                        if (x[c] > o[c])
                            o[c] = x[c];
                }
            }
        }
    }
}

/* acc = sum(x + input_offset) over the window (no padding), then the
 * requantization (its multiplier carries the 1 / window size). */
void tsr_avgpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c, kh = a->kh, kw = a->kw;
    const int32_t area_off = kh * kw * a->input_offset;
    int32_t r0, r1, oy, ox, c, ky, kx;

    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    for (oy = r0; oy < r1; oy++) {
        for (ox = 0; ox < a->out_w; ox++) {
            const int8_t *x0 = a->in + ((size_t)oy * a->sh * a->in_w + (size_t)ox * a->sw) * C;
            int8_t *o = a->out + ((size_t)oy * a->out_w + ox) * C;
            for (c = 0; c < C; c++) {
                int32_t acc = area_off;
                for (ky = 0; ky < kh; ky++) {
                    const int8_t *x = x0 + (size_t)ky * a->in_w * C + c;
                    for (kx = 0; kx < kw; kx++, x += C)
                        acc += *x;
                }
                if (a->rq) {
                    o[c] = (int8_t)tsr_requantize(acc, a->rq, c);
                } else {
                    /* not a layer the IR makes (avgpool always requantizes);
                     * saturate rather than wrap */
                    o[c] = (int8_t)(acc < INT8_MIN ? INT8_MIN : acc > INT8_MAX ? INT8_MAX : acc);
                }
            }
        }
    }
}
