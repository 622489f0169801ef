/*
 * Fully connected layers with CMSIS-NN's API: arm_fully_connected_s8
 * (per-tensor requantization) and arm_fully_connected_per_channel_s8.
 * Written for tessera: the library's fully connected core (mm.c) with
 * CMSIS-NN's requantization (TSR_RQ_HU); the context buffer, when it holds
 * 2 * K bytes (rounded up to 4 values), takes the input as an int16 column.
 */
#include "arm_nnfunctions.h"
#include "tsr_mm.h"

static arm_cmsis_nn_status fc(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *p, const cmsis_nn_dims *input_dims, const int8_t *input,
                              const cmsis_nn_dims *filter_dims, const int8_t *filter, const int32_t *bias,
                              const cmsis_nn_dims *output_dims, int8_t *output, const int32_t *mul,
                              const int32_t *shift, int32_t per_channel)
{
    if (p->filter_offset != 0)
        return ARM_CMSIS_NN_ARG_ERROR;
    tsr_mm_t m;
    m.w = filter;
    m.bias = bias;
    m.k = filter_dims->n;
    m.co = output_dims->c;
    m.q = tsr_rqp_cmsis(mul, shift, p->output_offset, p->activation.min, p->activation.max);
    m.q.step = per_channel;
    m.dbl = 0;
    for (int32_t n = 0; n < input_dims->n; n++)
        tsr_mm_fc(&m, input + n * m.k, p->input_offset, output + n * m.co, ctx ? (int32_t *)ctx->buf : NULL,
                  ctx ? ctx->size : 0, TSR_RQ_HU);
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
                                           const cmsis_nn_per_tensor_quant_params *quant_params,
                                           const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                           const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                           const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    return fc(ctx, fc_params, input_dims, input_data, filter_dims, filter_data, bias_data, output_dims, output_data,
              &quant_params->multiplier, &quant_params->shift, 0);
}

arm_cmsis_nn_status arm_fully_connected_per_channel_s8(const cmsis_nn_context *ctx,
                                                       const cmsis_nn_fc_params *fc_params,
                                                       const cmsis_nn_per_channel_quant_params *quant_params,
                                                       const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                                       const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                                       const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                                       const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)bias_dims;
    const cmsis_nn_fc_params *p = fc_params;
    /* the hot case straight to its core (tsr_fc_hu: 0 when it does not fit) */
    if (p->filter_offset == 0 && bias_data && input_dims->n == 1 && p->activation.min == -128 &&
        p->activation.max == 127 && ctx) {
        const tsr_fc_hu_t f = {filter_data, bias_data, quant_params->multiplier, quant_params->shift,
                               filter_dims->n, output_dims->c, p->output_offset};
        if (tsr_fc_hu(&f, input_data, p->input_offset, output_data, (int32_t *)ctx->buf, ctx->buf ? ctx->size : 0))
            return ARM_CMSIS_NN_SUCCESS;
    }
    return fc(ctx, fc_params, input_dims, input_data, filter_dims, filter_data, bias_data, output_dims, output_data,
              quant_params->multiplier, quant_params->shift, 1);
}
