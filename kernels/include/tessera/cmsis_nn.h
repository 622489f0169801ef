/*
 * The Cortex-M kernel library (kernels/cmsis_nn/): tessera's tile API
 * (tessera/kernels.h argument structs) on top of CMSIS-NN's API. The code
 * generator calls these for the layers whose arithmetic is CMSIS-NN's
 * (site_scons/tessera/codegen/libraries/cmsis_nn.py decides per layer) and
 * the reference kernels for the others.
 *
 * Scratch (tsr_conv_args_t.scratch, sized by kernels/cmsis_nn/library.yaml):
 * the tile's multipliers and shifts in CMSIS-NN's form (8 bytes per output
 * channel), the depthwise filter in CMSIS-NN's [kh][kw][c] order, then the
 * CMSIS-NN function's own buffer. A CMSIS-NN call that refuses its
 * arguments falls back to the reference kernel, so a tile is always
 * computed exactly.
 */
#ifndef TESSERA_CMSIS_NN_H
#define TESSERA_CMSIS_NN_H

#include "tessera/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

void tsr_cmsis_conv2d(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_pointwise(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_depthwise(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_linear(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_maxpool(const tsr_pool_args_t *a, int core, int ncores);
/* tessera's own semantics (CMSIS-NN's differ), DSP-optimized here */
void tsr_cmsis_avgpool(const tsr_pool_args_t *a, int core, int ncores);
void tsr_cmsis_add(const tsr_add_args_t *a, int core, int ncores);
/* a concatenation (concat.c): inputs sharing the output's quantization as
 * word copies, rescaled ones through a table of their 256 values */
void tsr_cmsis_concat(const tsr_concat_args_t *a, int core, int ncores);
/* a product of two tensors of one shape or a tensor and a [1, 1, C] vector,
 * per-tensor requantization in a fast form (mul.c); the rest on tsr_mul */
void tsr_cmsis_mul(const tsr_binary_args_t *a, int core, int ncores);
/* a resize (resize.c): nearest as copies of pixels and rows (or a table of the
 * 256 requantized values), bilinear four channels a turn with smlad; sums
 * past int32 on tsr_resize */
void tsr_cmsis_resize(const tsr_resize_args_t *a, int core, int ncores);
/* a dilated conv2d (dilated.c): each window gathered into an int16 column,
 * two output channels per smlad pass, tsr_requantize's requantization;
 * int32 outputs, weight offsets and planes on tsr_conv2d */
void tsr_cmsis_conv2d_dilated(const tsr_conv_args_t *a, int core, int ncores);
/* the IR's matmul with the DSP extension (matmul.c): a->scratch holds b's
 * columns transposed (K rounded up to 4 bytes each), their sums and two
 * rows of a as int16 pairs */
void tsr_cmsis_matmul(const tsr_matmul_args_t *a, int core, int ncores);
/* attention's row-wise ops (rowwise.c): the reference kernels' arguments
 * and results, rows' sums with the DSP extension */
void tsr_cmsis_softmax(const tsr_softmax_args_t *a, int core, int ncores);
void tsr_cmsis_layernorm(const tsr_layernorm_args_t *a, int core, int ncores);
void tsr_cmsis_lut(const tsr_lut_args_t *a, int core, int ncores);
/* the transpose (movement.c): tsr_transpose's arguments and results, moved in words */
void tsr_cmsis_transpose(const tsr_transpose_args_t *a, int core, int ncores);
/* a split reduction's step (kernels/cmsis_nn/split.c; tsr_split_step's
 * arguments and results, DSP dot products; input offsets in [-32640, 32639]) */
void tsr_cmsis_split_step(const tsr_split_args_t *s, int core, int ncores);
/* tessera's whole requantization (floor rounding, an additive term,
 * Requant.divisor, int32 outputs: NEMO/DORY layers), DSP-optimized, no
 * scratch; input_offset within [-255, 255] (any_rq.c) */
void tsr_cmsis_conv2d_rq(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_pointwise_rq(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_linear_rq(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_depthwise_rq(const tsr_conv_args_t *a, int core, int ncores);
/* TFLite's rounding (TSR_ROUND_TFLITE: conv2d, pointwise, depthwise; a
 * linear layer with it), on the same cores as the CMSIS-NN calls;
 * input_offset within [-255, 255], the scratch as the CMSIS-NN calls' */
void tsr_cmsis_conv2d_tfl(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_pointwise_tfl(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_depthwise_tfl(const tsr_conv_args_t *a, int core, int ncores);
void tsr_cmsis_linear_tfl(const tsr_conv_args_t *a, int core, int ncores);
/* fused depthwise/pointwise steps (kernels.h) on the CMSIS-NN layer kernels
 * (fused.c), both layers with CMSIS-NN's arithmetic; scratch in dw.scratch:
 * both layers' library.yaml scratch (whole channel count); pw_dw's buf also
 * holds the depthwise's output block when fd < C (after the intermediate,
 * word-aligned: out_h * out_w * fd more bytes) */
void tsr_cmsis_dw_pw(const tsr_dw_pw_args_t *a, int core, int ncores);
void tsr_cmsis_pw_dw(const tsr_pw_dw_args_t *a, int core, int ncores);
/* PW->DW row-wise with the shifted buffer (tessera/pw_dw_rows.h): buf holds
 * (fd - 1) * sh + kh pointwise rows of every channel; the same scratch */
void tsr_cmsis_pw_dw_rows(const tsr_pw_dw_args_t *a, int core, int ncores);
/* the recurrent step (tsr_lstm_args_t; a.pre required): SMLAD gate rows */
void tsr_cmsis_lstm_step(const tsr_lstm_args_t *a, int core, int ncores);
void tsr_cmsis_lstm_project(const tsr_lstm_args_t *a, int core, int ncores);
/* ONNX's LSTM and GRU step (tsr_onnx_rnn_args_t): SMLAD for both gate sums */
void tsr_cmsis_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_CMSIS_NN_H */
