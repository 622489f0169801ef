/*
 * The CMSIS-NN entry points tessera's Cortex-M kernels implement, with
 * CMSIS-NN's signatures (the API of ARM's CMSIS-NN 7.x, where
 * arm_convolve_s8 takes upscale_dims). tessera's implementations live in
 * kernels/cmsis_nn/arm/; building with `cmsis_nn=<ARM CMSIS-NN checkout>`
 * compiles ARM's instead, against ARM's headers.
 *
 * Arithmetic (tessera's, and CMSIS-NN's when built with
 * CMSIS_NN_USE_SINGLE_ROUNDING): with s = 31 - shift (1 <= s <= 62),
 *     y = clamp(((acc * multiplier + 2^(s-1)) >> s) + output_offset, min, max)
 * in 64-bit arithmetic, acc = bias + sum((x + input_offset) * w), padded
 * positions contributing 0. Layouts are NHWC; filters [C_OUT][KH][KW][C_IN],
 * depthwise filters [1][KH][KW][C_OUT], fully connected [C_OUT][K].
 */
#ifndef ARM_NNFUNCTIONS_H
#define ARM_NNFUNCTIONS_H

#include "arm_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ctx: 2 * KH * KW * C_IN int16 of im2col (rounded up to 4 elements) */
arm_cmsis_nn_status arm_convolve_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                    const cmsis_nn_per_channel_quant_params *quant_params,
                                    const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                    const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                    const cmsis_nn_dims *upscale_dims, const cmsis_nn_dims *output_dims,
                                    int8_t *output_data);
int32_t arm_convolve_s8_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims);

/* 1x1, stride 1, no padding */
arm_cmsis_nn_status arm_convolve_1x1_s8_fast(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                             const cmsis_nn_per_channel_quant_params *quant_params,
                                             const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                             const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                             const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                             const cmsis_nn_dims *output_dims, int8_t *output_data);

/* 3x3, ch_mult 1, padding.w <= 1 */
arm_cmsis_nn_status arm_depthwise_conv_3x3_s8(const cmsis_nn_context *ctx,
                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                              const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims, int8_t *output_data);

/* ch_mult 1; ctx: C * KH * KW int16 */
arm_cmsis_nn_status arm_depthwise_conv_s8_opt(const cmsis_nn_context *ctx,
                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                              const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims, int8_t *output_data);
int32_t arm_depthwise_conv_s8_opt_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                  const cmsis_nn_dims *filter_dims);

/* any depthwise convolution */
arm_cmsis_nn_status arm_depthwise_conv_s8(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *dw_conv_params,
                                          const cmsis_nn_per_channel_quant_params *quant_params,
                                          const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                          const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                          const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                          const cmsis_nn_dims *output_dims, int8_t *output_data);

/* filter_dims->n = K (accumulation depth), output_dims->c = C_OUT */
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
                                           const cmsis_nn_per_tensor_quant_params *quant_params,
                                           const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                           const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                           const cmsis_nn_dims *output_dims, int8_t *output_data);
arm_cmsis_nn_status arm_fully_connected_per_channel_s8(const cmsis_nn_context *ctx,
                                                       const cmsis_nn_fc_params *fc_params,
                                                       const cmsis_nn_per_channel_quant_params *quant_params,
                                                       const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                                       const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                                       const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                                       const cmsis_nn_dims *output_dims, int8_t *output_data);

/* padded positions never win; the result is clamped to the activation */
arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
                                    const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims,
                                    int8_t *output_data);

#ifdef __cplusplus
}
#endif

#endif /* ARM_NNFUNCTIONS_H */
