/*
 * The argument types of CMSIS-NN's public API (the subset tessera calls),
 * declared here with CMSIS-NN's names and member order so that the same
 * calls compile against either this library or ARM's CMSIS-NN (see the
 * README: the `cmsis_nn=<checkout>` build variable). Written for tessera
 * from CMSIS-NN's documented API; no ARM source is included.
 */
#ifndef ARM_NN_TYPES_H
#define ARM_NN_TYPES_H

#include <stdint.h>

typedef enum {
    ARM_CMSIS_NN_SUCCESS = 0,
    ARM_CMSIS_NN_ARG_ERROR = -1,
    ARM_CMSIS_NN_NO_IMPL_ERROR = -2,
    ARM_CMSIS_NN_FAILURE = -3,
} arm_cmsis_nn_status;

typedef struct {
    int32_t w;
    int32_t h;
} cmsis_nn_tile;

/* scratch memory of a call (im2col, unpacked weights, ...) */
typedef struct {
    void *buf;
    int32_t size;
} cmsis_nn_context;

typedef struct {
    int32_t n;    /* batch, or output channels of a filter */
    int32_t h;
    int32_t w;
    int32_t c;
} cmsis_nn_dims;

/* per output channel: y = requantize(acc, multiplier[c], shift[c]), where
 * shift is a left shift (negative: right), the TFLite convention */
typedef struct {
    int32_t *multiplier;
    int32_t *shift;
} cmsis_nn_per_channel_quant_params;

typedef struct {
    int32_t multiplier;
    int32_t shift;
} cmsis_nn_per_tensor_quant_params;

typedef struct {
    int32_t min;
    int32_t max;
} cmsis_nn_activation;

typedef struct {
    int32_t input_offset;     /* added to every input value: -input zero point */
    int32_t output_offset;    /* added to every requantized output: the output zero point */
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;    /* top (h) and left (w); bottom/right follow from the output size */
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_conv_params;

typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t ch_mult;          /* output channels per input channel */
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_dw_conv_params;

typedef struct {
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_activation activation;
} cmsis_nn_pool_params;

typedef struct {
    int32_t input_offset;
    int32_t filter_offset;    /* 0: symmetric weights */
    int32_t output_offset;
    cmsis_nn_activation activation;
} cmsis_nn_fc_params;

#endif /* ARM_NN_TYPES_H */
