/*
 * Convolutions with CMSIS-NN's API: arm_convolve_s8 (any kernel, im2col)
 * and arm_convolve_1x1_s8_fast (pointwise). Written for tessera: CMSIS-NN's
 * arguments handed to the library's matrix core (mm.c) with CMSIS-NN's
 * requantization (TSR_RQ_HU: half up, single rounding).
 */
#include "arm_nnfunctions.h"
#include "tsr_mm.h"

static tsr_mm_t mm_params(const cmsis_nn_conv_params *p, const cmsis_nn_per_channel_quant_params *q,
                          const int8_t *w, const int32_t *bias, int32_t k, int32_t co)
{
    tsr_mm_t m;
    m.w = w;
    m.bias = bias;
    m.k = k;
    m.co = co;
    m.q = tsr_rqp_cmsis(q->multiplier, q->shift, p->output_offset, p->activation.min, p->activation.max);
    m.dbl = 0;
    return m;
}

int32_t arm_convolve_s8_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    return tsr_cols_bytes(filter_dims->h * filter_dims->w * input_dims->c, 2);
}

arm_cmsis_nn_status arm_convolve_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                    const cmsis_nn_per_channel_quant_params *quant_params,
                                    const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                    const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                    const cmsis_nn_dims *upscale_dims, const cmsis_nn_dims *output_dims,
                                    int8_t *output_data)
{
    (void)bias_dims;
    const int32_t k = filter_dims->h * filter_dims->w * input_dims->c;
    if (ctx == NULL || ctx->buf == NULL || filter_dims->c != input_dims->c || conv_params->dilation.w != 1 ||
        conv_params->dilation.h != 1 || (upscale_dims && (upscale_dims->h != 1 || upscale_dims->w != 1)))
        return ARM_CMSIS_NN_ARG_ERROR;
    const tsr_mm_t m = mm_params(conv_params, quant_params, filter_data, bias_data, k, output_dims->c);
    tsr_geom_t g;
    g.in_h = input_dims->h;
    g.in_w = input_dims->w;
    g.in_c = input_dims->c;
    g.kh = filter_dims->h;
    g.kw = filter_dims->w;
    g.sh = conv_params->stride.h;
    g.sw = conv_params->stride.w;
    g.pt = conv_params->padding.h;
    g.pl = conv_params->padding.w;
    g.in_off = conv_params->input_offset;
    g.out_h = output_dims->h;
    g.out_w = output_dims->w;
    for (int32_t n = 0; n < input_dims->n; n++) {
        g.in = input_data + n * input_dims->h * input_dims->w * input_dims->c;
        g.out = output_data + n * output_dims->h * output_dims->w * output_dims->c;
        if (!tsr_mm_conv(&m, &g, (int32_t *)ctx->buf, ctx->size, TSR_RQ_HU))
            return ARM_CMSIS_NN_ARG_ERROR;
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_convolve_1x1_s8_fast(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                             const cmsis_nn_per_channel_quant_params *quant_params,
                                             const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                             const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                             const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                             const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)filter_dims;
    (void)bias_dims;
    if (conv_params->padding.w != 0 || conv_params->padding.h != 0 || conv_params->stride.w != 1 ||
        conv_params->stride.h != 1 || ctx == NULL || ctx->buf == NULL)
        return ARM_CMSIS_NN_ARG_ERROR;
    const tsr_mm_t m = mm_params(conv_params, quant_params, filter_data, bias_data, input_dims->c, output_dims->c);
    const int32_t pixels = input_dims->n * input_dims->h * input_dims->w;
    if (!tsr_mm_pointwise(&m, input_data, pixels, conv_params->input_offset, output_data, (int32_t *)ctx->buf,
                          ctx->size, TSR_RQ_HU))
        return ARM_CMSIS_NN_ARG_ERROR;
    return ARM_CMSIS_NN_SUCCESS;
}
