/*
 * Reference pooling: HWC tiles (int8, or int32 accumulators), c channels in
 * and out. Each core computes output rows [core * ceil(out_h / ncores), ...).
 */
#include "ref_common.h"

/* Max pooling of int32 accumulators (a layer without requantization before
 * it): the same walk, 32-bit values in and out. */
static void maxpool_int32(const tsr_pool_args_t *a, int32_t r0, int32_t r1)
{
    const int32_t C = a->c;
    const int32_t *in = (const int32_t *)(const void *)a->in;
    int32_t oy, ox, c, ky, kx;
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, a->kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            int32_t *o = (int32_t *)(void *)a->out + ((size_t)oy * a->out_w + ox) * C;
            tsr_window(ix0, a->kw, a->in_w, &kx0, &kx1);
            for (c = 0; c < C; c++)
                o[c] = INT32_MIN;
            for (ky = ky0; ky < ky1; ky++) {
                for (kx = kx0; kx < kx1; kx++) {
                    const int32_t *x = in + ((size_t)(iy0 + ky) * a->in_w + (size_t)(ix0 + kx)) * C;
                    for (c = 0; c < C; c++)
                        if (x[c] > o[c])
                            o[c] = x[c];
                }
            }
        }
    }
}

/* Window maxima; padded positions are skipped (they never win). No
 * requantization: input and output share their quantization. */
void tsr_maxpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c;
    int32_t r0, r1, oy, ox, c, ky, kx;

    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    if (a->in_int32) {
        maxpool_int32(a, r0, r1);
        return;
    }
    for (oy = r0; oy < r1; oy++) {
        int32_t iy0 = oy * a->sh - a->pad_t, ky0, ky1;
        tsr_window(iy0, a->kh, a->in_h, &ky0, &ky1);
        for (ox = 0; ox < a->out_w; ox++) {
            int32_t ix0 = ox * a->sw - a->pad_l, kx0, kx1;
            int8_t *o = a->out + ((size_t)oy * a->out_w + ox) * C;
            tsr_window(ix0, a->kw, a->in_w, &kx0, &kx1);
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
 * requantization (its multiplier carries the 1 / window size); without one
 * the sum itself, as int32. An int32 input (a standalone requantization of
 * accumulators) sums in 64 bits. */
void tsr_avgpool(const tsr_pool_args_t *a, int core, int ncores)
{
    const int32_t C = a->c, kh = a->kh, kw = a->kw;
    const int64_t area_off = (int64_t)kh * kw * a->input_offset;
    const size_t esize = a->in_int32 ? 4 : 1;
    int32_t r0, r1, oy, ox, c, ky, kx;

    tsr_ref_share(a->out_h, core, ncores, &r0, &r1);
    for (oy = r0; oy < r1; oy++) {
        for (ox = 0; ox < a->out_w; ox++) {
            const size_t first = (size_t)oy * a->sh * a->in_w + (size_t)ox * a->sw;
            const size_t o = ((size_t)oy * a->out_w + ox) * C;
            for (c = 0; c < C; c++) {
                int64_t acc = area_off;
                for (ky = 0; ky < kh; ky++) {
                    size_t i = (first + (size_t)ky * a->in_w) * C + c;
                    const int8_t *x = a->in + i * esize;
                    if (a->in_int32) {
                        for (kx = 0; kx < kw; kx++, x += C * 4)
                            acc += *(const int32_t *)(const void *)x;
                    } else {
                        for (kx = 0; kx < kw; kx++, x += C)
                            acc += *x;
                    }
                }
                if (a->rq)
                    a->out[o + c] = (int8_t)tsr_requantize_at(acc, a->rq, oy, ox, c);
                else
                    ((int32_t *)(void *)a->out)[o + c] = (int32_t)acc;
            }
        }
    }
}
