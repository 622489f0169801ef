/*
 * Fully connected layers with CMSIS-NN's API: arm_fully_connected_s8
 * (per-tensor requantization) and arm_fully_connected_per_channel_s8.
 * Written for tessera.
 *
 * A vector times a matrix: every input word is sign-extended (with
 * input_offset) once and used for two output channels, two MACs per smlad.
 * No buffer is needed.
 */
#include "arm_nnfunctions.h"
#include "tsr_dsp.h"

static void fc_vector(const int8_t *x, const int8_t *w, const int32_t *bias, int32_t k, int32_t co,
                      const int32_t *mul, const int32_t *shift, int32_t per_channel, const cmsis_nn_fc_params *p,
                      int8_t *out)
{
    const int32_t groups = k >> 2, off2 = tsr_dup16(p->input_offset);
    int32_t c = 0;
    for (; c < co; c += 2) {
        const int32_t two = c + 1 < co;
        const int8_t *pa = w + c * k, *pb = two ? pa + k : pa;
        const int8_t *px = x;
        int32_t a0 = bias ? bias[c] : 0, a1 = bias && two ? bias[c + 1] : 0;
        for (int32_t g = groups; g > 0; g--) {
            uint32_t xv = tsr_ld32(px), wa = tsr_ld32(pa), wb = tsr_ld32(pb);
            int32_t x02 = tsr_sxtab16(off2, xv), x13 = tsr_sxtab16_ror8(off2, xv);
            px += 4;
            pa += 4;
            pb += 4;
            a0 = tsr_smlad(tsr_sxtb16(wa), x02, a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wa), x13, a0);
            a1 = tsr_smlad(tsr_sxtb16(wb), x02, a1);
            a1 = tsr_smlad(tsr_sxtb16_ror8(wb), x13, a1);
        }
        for (int32_t j = 0; j < (k & 3); j++) {
            a0 += (px[j] + p->input_offset) * pa[j];
            a1 += (px[j] + p->input_offset) * pb[j];
        }
        for (int32_t i = 0; i <= two; i++) {
            const int32_t ch = c + i, q = per_channel ? ch : 0;
            tsr_rq_t r = tsr_rq_make(mul[q], shift[q]);
            out[ch] = (int8_t)tsr_clamp(tsr_rq_apply(i ? a1 : a0, r) + p->output_offset, p->activation.min,
                                        p->activation.max);
        }
    }
}

static arm_cmsis_nn_status fc(const cmsis_nn_fc_params *p, const cmsis_nn_dims *input_dims, const int8_t *input,
                              const cmsis_nn_dims *filter_dims, const int8_t *filter, const int32_t *bias,
                              const cmsis_nn_dims *output_dims, int8_t *output, const int32_t *mul,
                              const int32_t *shift, int32_t per_channel)
{
    if (p->filter_offset != 0)
        return ARM_CMSIS_NN_ARG_ERROR;
    const int32_t k = filter_dims->n, co = output_dims->c;
    for (int32_t n = 0; n < input_dims->n; n++)
        fc_vector(input + n * k, filter, bias, k, co, mul, shift, per_channel, p, output + n * co);
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
                                           const cmsis_nn_per_tensor_quant_params *quant_params,
                                           const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                           const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                           const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    (void)bias_dims;
    return fc(fc_params, input_dims, input_data, filter_dims, filter_data, bias_data, output_dims, output_data,
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
    (void)ctx;
    (void)bias_dims;
    return fc(fc_params, input_dims, input_data, filter_dims, filter_data, bias_data, output_dims, output_data,
              quant_params->multiplier, quant_params->shift, 1);
}
