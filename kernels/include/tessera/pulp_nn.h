/*
 * tessera's PULP-NN-style kernels: the tile-level kernel API of
 * tessera/kernels.h (same argument structs, same arithmetic), parallel over
 * the cluster's cores. Every function computes the share of the tile that
 * belongs to `core` of `ncores` and writes nothing else (its own scratch
 * aside), so cores need no barrier inside a kernel.
 *
 * Difference from the reference kernels' contract: the scratch, conv2d
 * 2 * kh * kw * in_c bytes per core (im2col of two pixels), depthwise
 * (in_h + pad_t + pad_b) * kw bytes per core (a column stripe of one
 * channel, gathered from the HWC tile).
 */
#ifndef TESSERA_PULP_NN_H
#define TESSERA_PULP_NN_H

#include "tessera/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

void pnn_conv2d(const tsr_conv_args_t *a, int core, int ncores);
/* the same storing its output tile channel-major, a->out [out_c][out_h][out_w]
 * (a producer for pnn_depthwise_chw: a network's first convolution; int8
 * outputs of 4-channel blocks on the Xpulp path, else the direct loop) */
void pnn_conv2d_chw(const tsr_conv_args_t *a, int core, int ncores);
/* a split reduction's step (kernels/pulp_nn/split.c; tsr_split_step's
 * arguments and results, pv.sdotsp.b where the input offset is 0) */
void pnn_split_step(const tsr_split_args_t *s, int core, int ncores);
void pnn_pointwise(const tsr_conv_args_t *a, int core, int ncores);
/* the same storing its output tile channel-major, a->out [out_c][out_h][out_w]
 * (a producer for pnn_depthwise_chw; int8 outputs from 4-channel blocks of
 * pixel pairs on the Xpulp path, the rest one dot product at a time) */
void pnn_pointwise_chw(const tsr_conv_args_t *a, int core, int ncores);
void pnn_depthwise(const tsr_conv_args_t *a, int core, int ncores);
/* the same on a channel-major input tile, a->in [in_c][in_h][in_w] (a
 * channel's rows contiguous: copied into the padded plane in words, not
 * gathered byte by byte); the output HWC as pnn_depthwise's */
void pnn_depthwise_chw(const tsr_conv_args_t *a, int core, int ncores);
/* depthwise -> pointwise fused (kernels.h, tsr_dw_pw) on these kernels; dw.scratch: per-core stripes */
void pnn_dw_pw(const tsr_dw_pw_args_t *a, int core, int ncores);
/* The shared scheme the generated fused steps use: blocks of fd output rows
 * computed by all cores together, the depthwise (channels split over the
 * cores, as alone) into one shared fd-row buffer, a fork boundary, then the
 * pointwise (pixels split); pnn_dw_pw_block gives the two calls' arguments
 * for rows [y, y + n) of the band. With fd the band height a band is exactly
 * the two layers' tiles, with no stripe gathered twice. */
void pnn_dw_pw_block(const tsr_dw_pw_args_t *a, int32_t y, int32_t n, tsr_conv_args_t *d, tsr_conv_args_t *p);
/* where generated steps keep d and p (one pair for the network) */
extern tsr_conv_args_t pnn_dw_pw_parts[2];
/* The depthwise of a block of a->in_c channels (a fused step's
 * intermediate) written at a pixel stride of a->out_c channels; a->out,
 * weights, bias and rq start at the block's first channel. */
void pnn_depthwise_block(const tsr_conv_args_t *a, int core, int ncores);
/* pointwise -> depthwise channel-wise, the shared scheme (pw_dw.c): per
 * block of channels [c, c + n), p: pnn_pointwise of those channels over the
 * band into a->buf ([pw.in_h][pw.in_w][n]), a fork boundary, d:
 * pnn_depthwise_block of the block into the band's output. rq: two records
 * the block's requantization is copied into (arrays from channel c). */
void pnn_pw_dw_block(const tsr_pw_dw_args_t *a, int32_t c, int32_t n, tsr_conv_args_t *p, tsr_conv_args_t *d,
                     tsr_requant_t rq[2]);
extern tsr_requant_t pnn_pw_dw_rq[2];
/* pointwise -> depthwise row-wise with the shifted buffer (pw_dw.c,
 * tessera/pw_dw_rows.h), the shared scheme: for output rows [y, y + n) of
 * the band (y a multiple of a->fd), shift the kept rows of a->buf up, then
 * p: pnn_pointwise of the new rows, a fork boundary, d: pnn_depthwise. */
void pnn_pw_dw_rows_block(const tsr_pw_dw_args_t *a, int32_t y, int32_t n, tsr_conv_args_t *p, tsr_conv_args_t *d);
void pnn_linear(const tsr_conv_args_t *a, int core, int ncores);
void pnn_maxpool(const tsr_pool_args_t *a, int core, int ncores);
void pnn_avgpool(const tsr_pool_args_t *a, int core, int ncores);
void pnn_add(const tsr_add_args_t *a, int core, int ncores);
/* the IR's matmul (attention.c): a->scratch holds, per core, its output
 * columns of b transposed (K rounded up to 4 bytes each) and their sums */
void pnn_matmul2(const tsr_matmul_args_t *a, int core, int ncores);
/* attention's row-wise ops (kernels/pulp_nn/rowwise.c): the reference
 * kernels' arguments and results, rows over the cores */
void pnn_softmax(const tsr_softmax_args_t *a, int core, int ncores);
void pnn_layernorm(const tsr_layernorm_args_t *a, int core, int ncores);
void pnn_lut(const tsr_lut_args_t *a, int core, int ncores);
/* the transpose (kernels/pulp_nn/movement.c): tsr_transpose's arguments,
 * results and rows over the cores, moved in words */
void pnn_transpose(const tsr_transpose_args_t *a, int core, int ncores);
/* the recurrent step (tsr_lstm_args_t; a.pre required): the cells over the cores */
void pnn_lstm_step(const tsr_lstm_args_t *a, int core, int ncores);
void pnn_lstm_project(const tsr_lstm_args_t *a, int core, int ncores);
/* ONNX's LSTM and GRU step (tsr_onnx_rnn_args_t): the cells over the cores */
void pnn_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PULP_NN_H */
