/*
 * tessera kernel API: one call computes one output tile from an input tile
 * that is already in fast memory. The generated layer code moves tiles with
 * the HAL's DMA and calls these on every core (hal_fork); each call does the
 * share of the tile that belongs to `core` of `ncores`.
 *
 * Arithmetic (the IR's, see site_scons/tessera/ir.py; the golden model
 * site_scons/tessera/golden/ops.py is the oracle):
 *   acc = bias[c] + sum((x + input_offset) * (w + weight_offset))   over the window; padded
 *         positions contribute 0
 *   y   = clamp(((int64)acc * mul[c] + add[c] + R) >> shift[c]) + zero_point, lo, hi)
 *         R = 1 << (shift - 1) for TSR_ROUND_HALF_UP (0 when shift == 0),
 *         0 for TSR_ROUND_FLOOR; >> is arithmetic (floor).
 *   TFLite's arithmetic (models imported from .tflite):
 *   TSR_ROUND_TFLITE: y = clamp(tsr_tfl_multiply(acc, mul[c], shift[c]) + zero_point, lo, hi),
 *         TFLite's MultiplyByQuantizedMultiplier (two roundings, see below);
 *   TSR_ROUND_TFLITE_DIV: y = clamp(sign(acc) * ((|acc| + mul/2) / mul) + zero_point, lo, hi),
 *         TFLite's average pooling (mul = the window's size).
 *   When rq is NULL the output is acc itself, as int32.
 *
 * Layouts: activations HWC (int8, or int32 accumulators); conv weights
 * [out_c][kh][kw][in_c]; pointwise and linear [out_c][in_c]; depthwise
 * [c][kh][kw] (channel-major so that a channel tile is contiguous).
 *
 * Parameters per output element (the IR's Requant.shape and per-element
 * bias, from Gemm/MatMul graphs) are planes: each channel's values for the
 * rows and columns they vary along, [c][h'][w'] (h' 1 or the output's
 * height, w' likewise), one channel tile's planes contiguous like the other
 * per-channel arrays. Element (y, x, c) of the tile reads index
 * c * plane + y * step_h + x * step_w, the generated code pointing the
 * array at the tile's first row and column (tsr_plane_t).
 */
#ifndef TESSERA_KERNELS_H
#define TESSERA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { TSR_ROUND_HALF_UP = 0, TSR_ROUND_FLOOR = 1, TSR_ROUND_TFLITE = 2, TSR_ROUND_TFLITE_DIV = 3 };

/* How parameters that vary per output element are indexed (see above):
 * plane == 0 means they vary along the channels at most. */
typedef struct {
    int32_t plane, step_h, step_w;
} tsr_plane_t;

/* Requantization of a tile: arrays are indexed by the tile's channel (the
 * generated code points them at the tile's first channel) unless
 * per_channel is 0, when element 0 serves every channel; with elem.plane
 * set, by element (tsr_requantize_at). */
typedef struct {
    const int32_t *mul;
    const int32_t *add;      /* NULL: all zero */
    const int8_t *shift;
    int32_t per_channel;
    int32_t zero_point;
    int32_t lo, hi;
    int32_t rounding;        /* TSR_ROUND_* */
    tsr_plane_t elem;        /* per-element parameters (Requant.shape) */
    int32_t divisor;         /* 0 or 1: none; else Requant.divisor (floor rounding) */
    const int32_t *neg_mul;  /* NULL, or the multiplier and shift of a negative acc (a LeakyRelu */
    const int8_t *neg_shift; /* folded in; one value for every channel, half up or floor rounding) */
    int32_t add_shift;       /* add[i] counts units of 2^add_shift (a bias wider than 32 bits) */
    int32_t split;           /* 0, or (T << 8) | K: the Xpulp depthwise may requantize without
                              * mulh (kernels/pulp_nn/depthwise.c, DW_SPLIT; set at build time
                              * when every channel's accumulators allow it) */
} tsr_requant_t;

/* conv2d, pointwise, depthwise and linear tiles. */
typedef struct {
    const int8_t *in;            /* input tile, HWC [in_h][in_w][in_c] */
    int32_t in_h, in_w, in_c;
    const int8_t *weights;       /* see the layouts above; linear: [out_c][in_h*in_w*in_c] */
    const int32_t *bias;         /* [out_c], or NULL */
    void *out;                   /* output tile, HWC [out_h][out_w][out_c]: int8_t, or int32_t when rq is NULL */
    int32_t out_h, out_w, out_c;
    int32_t kh, kw, sh, sw;
    int32_t pad_t, pad_l, pad_b, pad_r;   /* this tile's padding */
    int32_t input_offset;
    const tsr_requant_t *rq;
    int8_t *scratch;             /* per-core scratch (im2col), scratch_bytes each, core-major */
    int32_t scratch_bytes;
    tsr_plane_t bias_elem;       /* bias per output element (a Gemm's full C matrix); plane 0: bias[c] */
    int32_t dh, dw;              /* dilation (0 or 1: adjacent taps): tap (ky, kx) reads input
                                  * row oy * sh - pad_t + ky * dh, column alike */
    int32_t weight_offset;       /* added to every weight (asymmetric uint8 weights): acc +=
                                  * (x + input_offset) * (w + weight_offset); 0 for the rest */
} tsr_conv_args_t;

/* maxpool and avgpool tiles (channels of input and output are the same). */
typedef struct {
    const int8_t *in;            /* int8, or int32 accumulators when in_int32 */
    int32_t in_h, in_w, c;
    int8_t *out;                 /* int8; int32 for an int32 max pool and an avgpool without rq */
    int32_t out_h, out_w;
    int32_t kh, kw, sh, sw;
    int32_t pad_t, pad_l, pad_b, pad_r;   /* maxpool only: padding never wins */
    int32_t input_offset;                 /* avgpool: acc = sum(x + input_offset) */
    const tsr_requant_t *rq;              /* avgpool */
    int32_t in_int32;
} tsr_pool_args_t;

/* elementwise add of two same-shape tiles:
 *   acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]   (int64)
 * or, when in_shift[0] is set (TFLite's ADD), each input rescaled first:
 *   acc = tsr_tfl_multiply((a + in_offset[0]) << 20, in_mul[0], in_shift[0]) + (the same for b) */
typedef struct {
    const int8_t *a, *b;         /* int8, or int32 accumulators when in_int32 */
    void *out;                   /* int8_t, or int32_t when rq is NULL */
    int32_t n;                   /* elements */
    int32_t in_mul[2], in_offset[2];
    int32_t in_shift[2];         /* 0: tessera's add; else TFLite's per-input rescale */
    const tsr_requant_t *rq;     /* per tensor; per channel or element when out_c is set */
    int32_t in_int32;
    int32_t out_w, out_c;        /* the tile's columns and channels (n = rows * out_w * out_c) */
} tsr_add_args_t;

/* product of two activation tiles (the IR's matmul), batches as rows:
 *   acc[y][x][c] = sum_k (a[y][x][k] + a_offset) * (b_y[k][c] + b_offset)
 * a: [out_h][out_w][k] (HWC: y a batch, x a row of its matrix);
 * b_y = b + y * b_batch, each [k][out_c] (b_batch 0: one matrix for every
 * batch), or with trans_b [out_c][k] (attention's K for Q.K^T).
 * scratch/scratch_bytes: per-core working memory of the optimized kernels
 * (the reference kernel needs none). */
typedef struct {
    const int8_t *a, *b;
    void *out;                   /* int8_t, or int32_t when rq is NULL */
    int32_t out_h, out_w, out_c, k;
    int32_t b_batch;
    int32_t a_offset, b_offset;
    const tsr_requant_t *rq;
    int32_t trans_b;
    int8_t *scratch;
    int32_t scratch_bytes;
} tsr_matmul_args_t;

/* elementwise product or sum of two int8 tensors with broadcasting: each
 * operand is [h][w][c] with every dimension the output's or 1 (a size-1
 * dimension repeats), e.g. squeeze-and-excitation's [H][W][C] * [1][1][C].
 *   mul: acc = (a + in_offset[0]) * (b + in_offset[1])
 *   add: acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
 * then rq (per tensor). */
typedef struct {
    const int8_t *a, *b;
    int8_t *out;
    int32_t out_h, out_w, out_c;
    int32_t a_h, a_w, a_c, b_h, b_w, b_c;
    int32_t in_mul[2], in_offset[2];
    const tsr_requant_t *rq;
} tsr_binary_args_t;

/* y = table[x + 128] of n pixels of c channels; with per_channel, channel
 * k of the tile reads its own 256 entries, table + k * 256 (the generated
 * code points table at the tile's first channel). */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t pixels, c;
    const int8_t *table;
    int32_t per_channel;
} tsr_lut_args_t;

/* concatenation of n_in int8 tensors along one axis of HWC: the output is
 * `outer` runs, each the inputs' runs of inner[i] elements in turn; input i
 * is rescaled, y = rq((x + in_offset[i]) * in_mul[i]) (rq per tensor). */
#define TSR_MAX_CONCAT 8
typedef struct {
    const int8_t *in[TSR_MAX_CONCAT];
    int8_t *out;
    int32_t n_in, outer;
    int32_t inner[TSR_MAX_CONCAT], in_mul[TSR_MAX_CONCAT], in_offset[TSR_MAX_CONCAT];
    const tsr_requant_t *rq;
} tsr_concat_args_t;

/* nearest/bilinear resize: rows[3 * oy] = (y0, y1, fy), cols[3 * ox] =
 * (x0, x1, fx), weights in `frac` fraction bits (F = 1 << frac):
 *   acc = sum of (F - fy | fy) * (F - fx | fx) * (x + input_offset) over the 4 taps
 * then rq (per tensor; its scale includes 2^-2frac). */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t in_h, in_w, c, out_h, out_w;
    const int32_t *rows, *cols;
    int32_t input_offset, frac;
    const tsr_requant_t *rq;
} tsr_resize_args_t;

/* softmax over the c channels of each pixel (the IR's integer softmax):
 *   s = sum_k table[max - x[k]]   (64-bit)
 *   y = clamp(zero_point + (table[max - x] * mul + (s << (shift - 1))) / (s << shift), lo, hi)
 * or, by mode, Deeploy's integer softmaxes in their kernels' 32-bit
 * arithmetic (ir.Layer; params: isoftmax coeffA, coeffB, coeffC, log2,
 * n_levels; itamax n_levels; itapartialmax group_width, n_levels), the
 * uint8 output stored shifted by 128. */
enum { TSR_SOFTMAX_TABLE = 0, TSR_SOFTMAX_ISOFTMAX = 1, TSR_SOFTMAX_ITAMAX = 2, TSR_SOFTMAX_ITAPARTIALMAX = 3 };
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t pixels, c;
    const int32_t *table;        /* 256 entries */
    int32_t mul, shift, zero_point, lo, hi;
    int32_t rounding;            /* TSR_ROUND_TFLITE: TFLite's reference int8 softmax (ir.Layer) */
    int32_t mode;                /* TSR_SOFTMAX_* */
    int32_t params[5];
} tsr_softmax_args_t;

/* layer normalization over the c channels of each pixel (the IR's layernorm):
 * mode TSR_LAYERNORM_INT: xo = x + input_offset, S1 = sum xo, S2 = sum xo^2,
 *   D = ((c * S2 - S1^2) << 16) + eps, f = (62 - bits(D)) / 2, R = 2^62 / isqrt(D << 2f),
 *   sh = 38 - f, acc = ((c * xo - S1) * R + 2^(sh - 1)) >> sh, then rq (per channel);
 * mode TSR_LAYERNORM_DEEPLOY (iLayerNorm): m = trunc(S1 / c), t = xo - m,
 *   std = isqrt(trunc(sum t^2 / c) + 1),
 *   y = clamp((trunc(t * weight[k] / std) + bias[k]) >> rq->shift[0], rq->lo, rq->hi). */
enum { TSR_LAYERNORM_INT = 0, TSR_LAYERNORM_DEEPLOY = 1 };
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t pixels, c;
    int32_t input_offset;
    int32_t mode;                /* TSR_LAYERNORM_* */
    int64_t eps;
    const int32_t *weight, *bias;   /* TSR_LAYERNORM_DEEPLOY: [c] each */
    const tsr_requant_t *rq;
} tsr_layernorm_args_t;

/* data movement (the IR's transpose and gather; a reshape is a copy the
 * generated code does with DMA alone). The input is a block [in_h][in_w][in_c]
 * in L1, the output a compact block:
 *   transpose: out axis k is in axis perm[k], out dims (d[perm[0]], d[perm[1]], d[perm[2]])
 *   gather:    out = in with the coordinate along `axis` replaced by index[k],
 *              k = 0 .. n_index - 1 (the output's extent along axis); index -1 is `fill` */
typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t in_h, in_w, in_c;
    int32_t perm[3];
} tsr_transpose_args_t;

typedef struct {
    const int8_t *in;
    int8_t *out;
    int32_t in_h, in_w, in_c;
    int32_t axis, n_index;
    const int32_t *index;
    int32_t fill;
} tsr_gather_args_t;

/* argmax over the channels of each pixel: out[p] = the first c with in[p][c] the largest (int32) */
typedef struct {
    const int8_t *in;
    int32_t *out;
    int32_t pixels, c;
} tsr_argmax_args_t;

void tsr_argmax(const tsr_argmax_args_t *a, int core, int ncores);
void tsr_transpose(const tsr_transpose_args_t *a, int core, int ncores);
void tsr_gather(const tsr_gather_args_t *a, int core, int ncores);

/* One time step of TFLite's integer LSTM (the IR's lstm, golden/recurrent.py)
 * for this core's share of the cells: gates in the order i, f, g, o (no i
 * when cifg), weights [gate][n_cell][n_input | n_output], biases with the
 * zero points folded in, multipliers and IR shifts per gate. Reads h_prev
 * and x, updates its cells of c in place and writes its cells' hidden
 * values: to h_next (no projection) or, as int8, to hid (projection; then
 * tsr_lstm_project computes h_next from hid, split over the outputs). */
typedef struct {
    const int8_t *x, *h_prev;
    int8_t *h_next;
    int16_t *c;
    int8_t *hid;                 /* [n_cell], projection only */
    int16_t *pre;                /* [gates][n_cell]: the gates' pre-activations (optimized kernels) */
    const int8_t *w_in, *w_rec;
    const int32_t *b_in, *b_rec;
    const int16_t *w_peep;       /* [peephole gates][n_cell], or NULL */
    const int8_t *w_proj;        /* [n_output][n_cell], or NULL */
    const int32_t *b_proj;
    int32_t n_input, n_cell, n_output, cifg;
    int32_t mul_in[4], mul_rec[4], mul_peep[4];
    int8_t shift_in[4], shift_rec[4], shift_peep[4];
    int8_t peep[4];              /* per gate: its row of w_peep, or -1 */
    int32_t hidden_mul, hidden_shift, hidden_zp;
    int32_t proj_mul, proj_shift, state_zp, proj_clip;
    int32_t cell_exp, cell_clip;
    /* a block of cells whose weights streamed in (codegen.recurrent): the
     * call computes cells [cell0, cell1) (cell1 0: all of them) and w_in,
     * w_rec hold w_rows rows per gate from cell w_first on (w_rows 0:
     * n_cell rows from cell 0, the whole matrices) */
    int32_t cell0, cell1, w_rows, w_first;
} tsr_lstm_args_t;

void tsr_lstm_step(const tsr_lstm_args_t *a, int core, int ncores);
void tsr_lstm_project(const tsr_lstm_args_t *a, int core, int ncores);

/* One time step of ONNX's LSTM or GRU as ONNX Runtime runs it in float
 * between Q/DQ (the IR's lstm of cell onnx_lstm / onnx_gru,
 * golden/recurrent.py onnx_cell): int8 input and weights with zero
 * points, the states in fixed point (hidden Q0.15, cell Q8.23), the gates'
 * pre-activations in Q8.23 through gemmlowp's 32-bit logistic and tanh.
 * Gates in ONNX's order (LSTM i, o, f, c; GRU z, r, h), weights
 * [gate][n_cell][n_input | n_cell], biases Q8.23. This core's share of the
 * cells: reads x and h_prev, writes h_next (and its c in place); with y
 * set, also y = clamp(rq_y(h) + zp_y) of its cells. */
typedef struct {
    const int8_t *x;
    const int16_t *h_prev;
    int16_t *h_next;
    int32_t *c;                  /* LSTM only */
    int8_t *y;                   /* or NULL */
    const int8_t *w_in, *w_rec;
    const int32_t *b_in, *b_rec;
    const int32_t *w_sums;       /* [gate][n_cell]: each row of w_in summed */
    int32_t n_input, n_cell, gru;
    int32_t zp_x, zp_w, zp_r, zp_y;
    int32_t mul_x, shift_x, mul_h, shift_h, mul_y, shift_y;
    int32_t cell0, cell1, w_rows, w_first;   /* as in tsr_lstm_args_t */
} tsr_onnx_rnn_args_t;

/* the cells a recurrent step's call computes, and a weight row's index */
static inline void tsr_rnn_cells(int32_t n_cell, int32_t cell0, int32_t cell1, int32_t *b, int32_t *e)
{
    *b = cell0;
    *e = cell1 ? cell1 : n_cell;
}

/* this core's share [j0, j1) of a call's cells: chunks of ceil(cells / ncores) */
static inline void tsr_rnn_share(int32_t n_cell, int32_t cell0, int32_t cell1, int core, int ncores,
                                 int32_t *j0, int32_t *j1)
{
    int32_t b, e, chunk;
    tsr_rnn_cells(n_cell, cell0, cell1, &b, &e);
    chunk = (e - b + ncores - 1) / (ncores > 0 ? ncores : 1);
    *j0 = b + chunk * core < e ? b + chunk * core : e;
    *j1 = *j0 + chunk < e ? *j0 + chunk : e;
}

static inline int32_t tsr_rnn_wrow(int32_t k, int32_t j, int32_t n_cell, int32_t w_rows, int32_t w_first)
{
    return k * (w_rows ? w_rows : n_cell) + j - w_first;
}

void tsr_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores);

/* depthwise -> pointwise fused row-wise (kernels/reference/dw_pw.c): the
 * depthwise output never leaves L1. Each core takes its share of the output
 * rows and computes them in blocks of fd rows: the block's depthwise rows,
 * all channels, into its own intermediate buffer (HWC, int8), then the
 * pointwise over that block.
 *   dw: the depthwise tile (input, weights, bias, rq, padding, stride; out_h,
 *       out_w, out_c its output = the pointwise's input); dw.out is unused
 *       and dw.rq is required (the intermediate is int8)
 *   pw: the pointwise (weights [out_c][dw.out_c], bias, rq, input_offset,
 *       out [dw.out_h][dw.out_w][out_c], out_c); its in/in_* are unused
 *   buf: ncores buffers of fd * dw.out_w * dw.out_c bytes, core-major */
typedef struct {
    tsr_conv_args_t dw, pw;
    int8_t *buf;
    int32_t fd;
} tsr_dw_pw_args_t;

void tsr_dw_pw(const tsr_dw_pw_args_t *a, int core, int ncores);

/* pointwise -> depthwise fused channel-wise (kernels/reference/pw_dw.c): the
 * pointwise output never leaves L1. Each core takes its share of the
 * channels and computes them in blocks of fd: the pointwise's fd output
 * channels over the whole input tile into its own intermediate buffer
 * ([pw.in_h][pw.in_w][fd], int8), then the depthwise of those channels.
 *   pw: the pointwise tile (in [in_h][in_w][in_c], weights [out_c][in_c],
 *       bias, rq (required: the intermediate is int8), input_offset); its
 *       out/out_* are unused
 *   dw: the depthwise (weights [c][kh][kw], bias, rq, input_offset, padding,
 *       stride; in_h/in_w as pw's, out [out_h][out_w][out_c] with out_c =
 *       pw.out_c); its in is unused
 *   buf: ncores buffers of fd * pw.in_h * pw.in_w bytes, core-major */
typedef struct {
    tsr_conv_args_t pw, dw;
    int8_t *buf;
    int32_t fd;
} tsr_pw_dw_args_t;

void tsr_pw_dw(const tsr_pw_dw_args_t *a, int core, int ncores);

/* pointwise -> depthwise fused row-wise with the shifted intermediate buffer
 * (kernels/reference/pw_dw_rows.c, tessera/pw_dw_rows.h): each core takes its
 * share of the depthwise's output rows in blocks of fd rows; its buffer holds
 * the (fd - 1) * dw.sh + dw.kh pointwise rows (all channels) a block reads,
 * and between blocks the overlap is shifted up and only new rows computed.
 * Same arguments as tsr_pw_dw, but pw.out_c is required (the channels) and
 * buf: ncores buffers of ((fd - 1) * dw.sh + dw.kh) * pw.in_w * pw.out_c
 * bytes, core-major; fd counts depthwise output rows. */
void tsr_pw_dw_rows(const tsr_pw_dw_args_t *a, int core, int ncores);
/* One step of a split reduction (kernels/reference/split.c): conv holds
 * the chunk's input box and weights ([out_c][kh][kw][kc]; linear: kh, kw
 * the input's h, w); acc the output tile's int32 sums [out_h][out_w][out_c];
 * first: start from the bias; last: requantize into conv->out instead of
 * storing the sums. */
typedef struct {
    const tsr_conv_args_t *conv;
    int32_t *acc;
    int32_t first, last;
} tsr_split_args_t;

void tsr_split_step(const tsr_split_args_t *s, int core, int ncores);
void tsr_conv2d(const tsr_conv_args_t *a, int core, int ncores);
void tsr_pointwise(const tsr_conv_args_t *a, int core, int ncores);
void tsr_depthwise(const tsr_conv_args_t *a, int core, int ncores);
void tsr_linear(const tsr_conv_args_t *a, int core, int ncores);
void tsr_maxpool(const tsr_pool_args_t *a, int core, int ncores);
void tsr_avgpool(const tsr_pool_args_t *a, int core, int ncores);
void tsr_add(const tsr_add_args_t *a, int core, int ncores);
void tsr_matmul(const tsr_matmul_args_t *a, int core, int ncores);
void tsr_mul(const tsr_binary_args_t *a, int core, int ncores);
void tsr_add_broadcast(const tsr_binary_args_t *a, int core, int ncores);
void tsr_lut(const tsr_lut_args_t *a, int core, int ncores);
void tsr_concat(const tsr_concat_args_t *a, int core, int ncores);
void tsr_resize(const tsr_resize_args_t *a, int core, int ncores);
void tsr_softmax(const tsr_softmax_args_t *a, int core, int ncores);
void tsr_layernorm(const tsr_layernorm_args_t *a, int core, int ncores);

/* floor(v / d) clamped to [lo, hi], for 1 < d and (hi - lo + 1) * d <=
 * 2^32 (the code generator's rule: Requant.divisor below 2^24 with an
 * 8-bit output): v is clamped first, so what is left to divide is below
 * (hi - lo + 1) * d and one 32-bit unsigned division (divu, udiv) gives
 * the exact quotient. */
static inline int32_t tsr_floor_div_clamp(int64_t v, int32_t d, int32_t lo, int32_t hi)
{
    int64_t base = (int64_t)lo * d;
    if (v <= base)
        return lo;
    if (v - base >= ((int64_t)hi - lo + 1) * d)
        return hi;
    return lo + (int32_t)((uint32_t)(v - base) / (uint32_t)d);
}

/* floor(v / divisor) + zero point, clamped (out of line: the kernels'
 * hot stores keep their registers) */
static __attribute__((noinline, unused)) int32_t tsr_requantize_divide(int64_t v, const tsr_requant_t *rq)
{
    return tsr_floor_div_clamp(v, rq->divisor, rq->lo - rq->zero_point, rq->hi - rq->zero_point) + rq->zero_point;
}

/* ---- TFLite's fixed-point arithmetic (gemmlowp's) ----------------------- */

/* SaturatingRoundingDoublingHighMul: (a * b + nudge) / 2^31, the nudge
 * 2^30 (1 - 2^30 below zero), the division toward zero: halves round up. */
static inline int32_t tsr_tfl_srdhm(int32_t a, int32_t b)
{
    if (a == b && a == INT32_MIN)
        return INT32_MAX;
    int64_t ab = (int64_t)a * b;
    int64_t num = ab + (ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30)));
    return (int32_t)(num >= 0 ? num >> 31 : -((-num) >> 31));
}

/* RoundingDivideByPOT: x / 2^e rounded half away from zero. */
static inline int32_t tsr_tfl_rdbpot(int32_t x, int32_t e)
{
    int32_t mask = (int32_t)(((int64_t)1 << e) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier with the IR's shift (exponent 31 - shift:
 * a left shift before the multiply, or a rounding right shift after it). */
static inline int32_t tsr_tfl_multiply(int32_t x, int32_t mul, int32_t shift)
{
    int32_t e = 31 - shift;
    int32_t left = e > 0 ? e : 0, right = e > 0 ? 0 : -e;
    return tsr_tfl_rdbpot(tsr_tfl_srdhm((int32_t)((uint32_t)x << left), mul), right);
}

/* The TFLite roundings of tsr_requantize_index (acc fits int32 there). */
static inline int32_t tsr_requantize_tflite(int64_t acc, const tsr_requant_t *rq, int32_t i)
{
    int32_t v;
    if (rq->rounding == TSR_ROUND_TFLITE) {
        v = tsr_tfl_multiply((int32_t)acc, rq->mul[i], rq->shift[i]);
    } else {
        int32_t n = rq->mul[i], a = (int32_t)acc;
        int32_t mag = ((a < 0 ? -a : a) + n / 2) / n;
        v = a < 0 ? -mag : mag;
    }
    v += rq->zero_point;
    return v < rq->lo ? rq->lo : v > rq->hi ? rq->hi : v;
}

/* The requantization step on its own (shared by kernels of every library),
 * with parameters i of the arrays. acc is 64-bit because an add's
 * accumulator needs it; conv accumulators are int32 and widen for free. */
static inline int32_t tsr_requantize_index(int64_t acc, const tsr_requant_t *rq, int32_t i)
{
    if (rq->rounding >= TSR_ROUND_TFLITE)
        return tsr_requantize_tflite(acc, rq, i);
    int32_t shift = rq->shift[i], mul = rq->mul[i];
    if (__builtin_expect(rq->neg_mul != 0, 0) && acc < 0) {
        shift = rq->neg_shift[0];
        mul = rq->neg_mul[0];
    }
    int64_t v = acc * mul + (rq->add ? (int64_t)rq->add[i] << rq->add_shift : 0);
    if (rq->rounding == TSR_ROUND_HALF_UP && shift > 0)
        v += (int64_t)1 << (shift - 1);
    if (__builtin_expect(rq->divisor > 1, 0))
        return tsr_requantize_divide(v >> shift, rq);
    v = (v >> shift) + rq->zero_point;
    if (v < rq->lo) v = rq->lo;
    if (v > rq->hi) v = rq->hi;
    return (int32_t)v;
}

/* The requantization of output channel c. */
static inline int32_t tsr_requantize(int64_t acc, const tsr_requant_t *rq, int32_t c)
{
    return tsr_requantize_index(acc, rq, rq->per_channel ? c : 0);
}

/* Index of element (y, x, c) of a tile in per-element parameter planes. */
static inline int32_t tsr_plane_index(const tsr_plane_t *p, int32_t y, int32_t x, int32_t c)
{
    return c * p->plane + y * p->step_h + x * p->step_w;
}

/* tsr_requantize for element (y, x, c) of the tile: the same unless the
 * parameters vary per element (rq->elem.plane). */
static inline int32_t tsr_requantize_at(int64_t acc, const tsr_requant_t *rq, int32_t y, int32_t x, int32_t c)
{
    if (!rq->elem.plane)
        return tsr_requantize(acc, rq, c);
    return tsr_requantize_index(acc, rq, tsr_plane_index(&rq->elem, y, x, c));
}

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_KERNELS_H */
