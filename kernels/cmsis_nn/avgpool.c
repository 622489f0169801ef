/*
 * Average pooling with tessera's semantics (CMSIS-NN's arm_avgpool_s8
 * divides with its own rounding and has no input offset or requantization,
 * so it is not used): acc = sum(x + input_offset) over the window, then
 * tessera's requantization. Four channels per word: sxtab16 adds bytes 0/2
 * and 1/3 into int16 lane sums, exact for windows of up to 256 values
 * (|sum| <= 256 * 128); larger windows go to the reference kernel.
 */
#include "tessera/cmsis_nn.h"
#include "tsr_dsp.h"

void tsr_cmsis_avgpool(const tsr_pool_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    if (a->rq == NULL || a->kh * a->kw > 256) {
        tsr_avgpool(a, 0, 1);
        return;
    }
    const int32_t C = a->c, groups = C >> 2, row = a->in_w * C;
    const int32_t area_off = a->kh * a->kw * a->input_offset;
    for (int32_t oy = 0; oy < a->out_h; oy++) {
        for (int32_t ox = 0; ox < a->out_w; ox++) {
            const int8_t *x0 = a->in + (oy * a->sh * a->in_w + ox * a->sw) * C;
            int8_t *o = a->out + (oy * a->out_w + ox) * C;
            for (int32_t g = 0; g < groups; g++) {
                int32_t s02 = 0, s13 = 0;
                for (int32_t ky = 0; ky < a->kh; ky++) {
                    const int8_t *p = x0 + ky * row + g * 4;
                    for (int32_t kx = 0; kx < a->kw; kx++, p += C) {
                        uint32_t x = tsr_ld32(p);
                        s02 = tsr_sxtab16(s02, x);
                        s13 = tsr_sxtab16_ror8(s13, x);
                    }
                }
                const int32_t c = g * 4;
                o[c] = (int8_t)tsr_requantize((int16_t)s02 + area_off, a->rq, c);
                o[c + 1] = (int8_t)tsr_requantize((int16_t)s13 + area_off, a->rq, c + 1);
                o[c + 2] = (int8_t)tsr_requantize((s02 >> 16) + area_off, a->rq, c + 2);
                o[c + 3] = (int8_t)tsr_requantize((s13 >> 16) + area_off, a->rq, c + 3);
            }
            for (int32_t c = groups * 4; c < C; c++) {
                int32_t acc = area_off;
                for (int32_t ky = 0; ky < a->kh; ky++)
                    for (int32_t kx = 0; kx < a->kw; kx++)
                        acc += x0[ky * row + kx * C + c];
                o[c] = (int8_t)tsr_requantize(acc, a->rq, c);
            }
        }
    }
}
