/*
 * Max pooling with CMSIS-NN's API: arm_max_pool_s8. Written for tessera.
 * Four channels per word: ssub8 + sel give the bytewise maximum in two
 * instructions. Windows are clipped to the input, so padding never wins.
 */
#include "arm_nnfunctions.h"
#include "tsr_dsp.h"

arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
                                    const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims,
                                    int8_t *output_data)
{
    (void)ctx;
    const cmsis_nn_pool_params *p = pool_params;
    const int32_t c = input_dims->c, groups = c >> 2;
    const int32_t clamp = p->activation.min > -128 || p->activation.max < 127;
    if (input_dims->n < 1)
        return ARM_CMSIS_NN_ARG_ERROR;
    for (int32_t n = 0; n < input_dims->n; n++) {
        const int8_t *in = input_data + n * input_dims->h * input_dims->w * c;
        int8_t *out = output_data + n * output_dims->h * output_dims->w * c;
        for (int32_t oy = 0; oy < output_dims->h; oy++) {
            const int32_t iy = oy * p->stride.h - p->padding.h;
            const int32_t y0 = iy < 0 ? 0 : iy;
            const int32_t y1 = iy + filter_dims->h > input_dims->h ? input_dims->h : iy + filter_dims->h;
            for (int32_t ox = 0; ox < output_dims->w; ox++, out += c) {
                const int32_t ix = ox * p->stride.w - p->padding.w;
                const int32_t x0 = ix < 0 ? 0 : ix;
                const int32_t x1 = ix + filter_dims->w > input_dims->w ? input_dims->w : ix + filter_dims->w;
                for (int32_t g = 0; g < groups; g++) {
                    const int8_t *first = in + (y0 * input_dims->w + x0) * c + g * 4;
                    uint32_t m = tsr_ld32(first);
                    for (int32_t y = y0; y < y1; y++)
                        for (int32_t x = x0; x < x1; x++)
                            m = tsr_max8x4(m, tsr_ld32(in + (y * input_dims->w + x) * c + g * 4));
                    tsr_st32(out + g * 4, m);
                }
                for (int32_t ch = groups * 4; ch < c; ch++) {
                    int32_t m = in[(y0 * input_dims->w + x0) * c + ch];
                    for (int32_t y = y0; y < y1; y++)
                        for (int32_t x = x0; x < x1; x++) {
                            int32_t v = in[(y * input_dims->w + x) * c + ch];
                            m = v > m ? v : m;
                        }
                    out[ch] = (int8_t)m;
                }
                if (clamp)
                    for (int32_t ch = 0; ch < c; ch++)
                        out[ch] = (int8_t)tsr_clamp(out[ch], p->activation.min, p->activation.max);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
