/*
 * Depthwise convolutions with CMSIS-NN's API: arm_depthwise_conv_3x3_s8,
 * arm_depthwise_conv_s8_opt and arm_depthwise_conv_s8. Written for tessera:
 * CMSIS-NN's arguments handed to the library's depthwise core (dw.c) with
 * CMSIS-NN's requantization (TSR_RQ_HU); the filter is sign-extended once
 * per call into the context buffer when it holds C * KH * KW int16 (what
 * arm_depthwise_conv_s8_opt asks for).
 */
#include "arm_nnfunctions.h"
#include "tsr_mm.h"

int32_t arm_depthwise_conv_s8_opt_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    return input_dims->c * filter_dims->h * filter_dims->w * (int32_t)sizeof(int16_t);
}

/* ch_mult 1 (what every entry point below reduces to) */
static arm_cmsis_nn_status dw_ch1(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *p,
                                  const cmsis_nn_per_channel_quant_params *q, const cmsis_nn_dims *in_dims,
                                  const int8_t *input, const cmsis_nn_dims *f, const int8_t *filter,
                                  const int32_t *bias, const cmsis_nn_dims *out_dims, int8_t *output)
{
    tsr_dwk_t d;
    d.g.in_h = in_dims->h;
    d.g.in_w = in_dims->w;
    d.g.in_c = in_dims->c;
    d.g.kh = f->h;
    d.g.kw = f->w;
    d.g.sh = p->stride.h;
    d.g.sw = p->stride.w;
    d.g.pt = p->padding.h;
    d.g.pl = p->padding.w;
    d.g.in_off = p->input_offset;
    d.g.out_h = out_dims->h;
    d.g.out_w = out_dims->w;
    d.c = in_dims->c;
    d.w = filter;
    d.wx = ctx && ctx->buf && ctx->size >= arm_depthwise_conv_s8_opt_get_buffer_size(in_dims, f) ?
           (int32_t *)ctx->buf : NULL;
    d.room = d.wx ? ctx->size : 0;
    d.bias = bias;
    d.q = tsr_rqp_cmsis(q->multiplier, q->shift, p->output_offset, p->activation.min, p->activation.max);
    for (int32_t n = 0; n < in_dims->n; n++) {
        d.g.in = input + n * in_dims->h * in_dims->w * in_dims->c;
        d.g.out = output + n * out_dims->h * out_dims->w * out_dims->c;
        tsr_dw(&d, TSR_RQ_HU);
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_depthwise_conv_3x3_s8(const cmsis_nn_context *ctx,
                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                              const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    if (input_dims->c != output_dims->c || filter_dims->h != 3 || filter_dims->w != 3 ||
        dw_conv_params->padding.w > 1 || dw_conv_params->dilation.w != 1 || dw_conv_params->dilation.h != 1)
        return ARM_CMSIS_NN_ARG_ERROR;
    return dw_ch1(ctx, dw_conv_params, quant_params, input_dims, input_data, filter_dims, filter_data, bias_data,
                  output_dims, output_data);
}

arm_cmsis_nn_status arm_depthwise_conv_s8_opt(const cmsis_nn_context *ctx,
                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                              const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    if (input_dims->c != output_dims->c || dw_conv_params->dilation.w != 1 || dw_conv_params->dilation.h != 1 ||
        ctx == NULL || ctx->buf == NULL)
        return ARM_CMSIS_NN_ARG_ERROR;
    return dw_ch1(ctx, dw_conv_params, quant_params, input_dims, input_data, filter_dims, filter_data, bias_data,
                  output_dims, output_data);
}

/* The general case, any channel multiplier: output channel c * ch_mult + m
 * reads input channel c. */
arm_cmsis_nn_status arm_depthwise_conv_s8(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *dw_conv_params,
                                          const cmsis_nn_per_channel_quant_params *quant_params,
                                          const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                          const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                          const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                          const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    const cmsis_nn_dw_conv_params *p = dw_conv_params;
    if (p->dilation.w != 1 || p->dilation.h != 1)
        return ARM_CMSIS_NN_ARG_ERROR;
    if (p->ch_mult == 1)
        return dw_ch1(ctx, p, quant_params, input_dims, input_data, filter_dims, filter_data, bias_data,
                      output_dims, output_data);
    const int32_t ci = input_dims->c, co = output_dims->c;
    for (int32_t n = 0; n < input_dims->n; n++) {
        const int8_t *in = input_data + n * input_dims->h * input_dims->w * ci;
        int8_t *out = output_data + n * output_dims->h * output_dims->w * co;
        for (int32_t oy = 0; oy < output_dims->h; oy++)
            for (int32_t ox = 0; ox < output_dims->w; ox++)
                for (int32_t oc = 0; oc < co; oc++) {
                    int32_t acc = bias_data ? bias_data[oc] : 0;
                    const int32_t ic = oc / p->ch_mult;
                    for (int32_t ky = 0; ky < filter_dims->h; ky++) {
                        const int32_t iy = oy * p->stride.h - p->padding.h + ky;
                        if (iy < 0 || iy >= input_dims->h)
                            continue;
                        for (int32_t kx = 0; kx < filter_dims->w; kx++) {
                            const int32_t ix = ox * p->stride.w - p->padding.w + kx;
                            if (ix < 0 || ix >= input_dims->w)
                                continue;
                            acc += (in[(iy * input_dims->w + ix) * ci + ic] + p->input_offset) *
                                   filter_data[(ky * filter_dims->w + kx) * co + oc];
                        }
                    }
                    tsr_rq_t r = tsr_rq_make(quant_params->multiplier[oc], quant_params->shift[oc]);
                    out[(oy * output_dims->w + ox) * co + oc] = (int8_t)tsr_clamp(
                        tsr_rq_apply(acc, r) + p->output_offset, p->activation.min, p->activation.max);
                }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
