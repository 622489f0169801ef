/*
 * The cells of one step of TFLite's integer LSTM (tsr_lstm_args_t in
 * tessera/kernels.h), shared by every kernel library: each library passes
 * its own int8 dot product (plain C, SMLAD, Xpulp sdotp) and its own split
 * of the cells over the cores. Every cell depends only on its own rows of
 * the gate matrices, its own cell state and the previous hidden state, so
 * computing cell by cell gives TFLite's vector-by-vector results exactly.
 */
#ifndef TESSERA_LSTM_CELL_H
#define TESSERA_LSTM_CELL_H

#include <stdint.h>

#include "tessera/fixed16.h"
#include "tessera/kernels.h"

typedef int32_t (*tsr_dot8_fn)(const int8_t *w, const int8_t *v, int32_t n);

/* gate k's pre-activation of cell j: sat16(input part) + recurrent part, saturated */
static inline int32_t tsr_lstm_gate(const tsr_lstm_args_t *a, int32_t k, int32_t j, tsr_dot8_fn dot)
{
    int32_t row = k * a->n_cell + j, wrow = tsr_rnn_wrow(k, j, a->n_cell, a->w_rows, a->w_first);
    int32_t in = a->b_in[row] + dot(a->w_in + (int64_t)wrow * a->n_input, a->x, a->n_input);
    int32_t g = tsr_sat16(tsr_tfl_multiply(in, a->mul_in[k], a->shift_in[k]));
    int32_t rec = a->b_rec[row] + dot(a->w_rec + (int64_t)wrow * a->n_output, a->h_prev, a->n_output);
    return tsr_sat16(g + tsr_tfl_multiply(rec, a->mul_rec[k], a->shift_rec[k]));
}

/* the peephole term of gate k on cell state c (TFLite applies it to the
 * first n_output cells, all of them without projection) */
static inline int32_t tsr_lstm_peep(const tsr_lstm_args_t *a, int32_t k, int32_t j, int32_t g, int32_t c)
{
    if (a->peep[k] < 0 || j >= a->n_output)
        return g;
    int32_t w = a->w_peep[a->peep[k] * a->n_cell + j];
    return tsr_sat16(g + tsr_tfl_multiply(w * c, a->mul_peep[k], a->shift_peep[k]));
}

/* cell j's update from its gates' pre-activations pre[k] (Q3.12, saturated) */
static inline void tsr_lstm_cell(const tsr_lstm_args_t *a, int32_t j, const int32_t *pre)
{
    const int32_t fi = a->cifg ? 0 : 1, gi = fi + 1, oi = fi + 2;
    int32_t c = a->c[j];
    int32_t f = tsr_sigmoid16(tsr_lstm_peep(a, fi, j, pre[fi], c));
    int32_t i = a->cifg ? 32767 - f : tsr_sigmoid16(tsr_lstm_peep(a, 0, j, pre[0], c));
    int32_t g = tsr_tanh16(pre[gi], 3);
    c = tsr_sat16(tsr_w16(tsr_rdbpot(f * c, 15)) + tsr_w16(tsr_rdbpot(i * g, 30 + a->cell_exp)));
    if (a->cell_clip > 0)
        c = c > a->cell_clip ? a->cell_clip : c < -a->cell_clip ? -a->cell_clip : c;
    int32_t o = tsr_sigmoid16(tsr_lstm_peep(a, oi, j, pre[oi], c));
    int32_t h = tsr_tfl_multiply(o * tsr_tanh16(c, 15 + a->cell_exp), a->hidden_mul, a->hidden_shift);
    if (a->w_proj) {
        h -= a->hidden_zp;
        a->hid[j] = (int8_t)(h < -128 ? -128 : h > 127 ? 127 : h);
    } else {
        h += a->hidden_zp;
        a->h_next[j] = (int8_t)(h < -128 ? -128 : h > 127 ? 127 : h);
    }
    a->c[j] = (int16_t)c;
}

/* cells [j0, j1), each gate row by `dot` */
static inline void tsr_lstm_cells(const tsr_lstm_args_t *a, int32_t j0, int32_t j1, tsr_dot8_fn dot)
{
    const int32_t gates = a->cifg ? 3 : 4;
    for (int32_t j = j0; j < j1; j++) {
        int32_t pre[4];
        for (int32_t k = 0; k < gates; k++)
            pre[k] = tsr_lstm_gate(a, k, j, dot);
        tsr_lstm_cell(a, j, pre);
    }
}

/* the gates' input or recurrent part of `count` rows of gate k's matrix
 * (weights from row wrow, biases and pre-activations from row brow), by
 * `dot2`, two rows at a time: the input part sets pre[r] = sat16(MBQM(b +
 * w x)), the recurrent part adds MBQM(b + w h) to it, saturated (TFLite's
 * two MatrixBatchVectorMultiplyAccumulate) */
typedef void (*tsr_dot8x2_fn)(const int8_t *w0, const int8_t *w1, const int8_t *v, int32_t n,
                              int32_t *s0, int32_t *s1);

static inline void tsr_lstm_rows(const int8_t *w, int32_t wrow, const int32_t *b, int32_t brow, const int8_t *v,
                                 int32_t n, int32_t count, int32_t mul, int32_t shift, int16_t *pre, int recurrent,
                                 tsr_dot8x2_fn dot2)
{
    for (int32_t q = 0; q < count; q += 2) {
        int32_t two = q + 1 < count, s0 = b[brow + q], s1 = two ? b[brow + q + 1] : 0;
        dot2(w + (int64_t)(wrow + q) * n, w + (int64_t)(wrow + q + two) * n, v, n, &s0, &s1);
        for (int32_t u = 0; u <= two; u++) {
            int32_t v16 = tsr_tfl_multiply(u ? s1 : s0, mul, shift);
            pre[brow + q + u] = (int16_t)tsr_sat16(recurrent ? pre[brow + q + u] + v16 : v16);
        }
    }
}

/* the projection of outputs [o0, o1) from the cells' int8 hidden values */
static inline void tsr_lstm_projection(const tsr_lstm_args_t *a, int32_t o0, int32_t o1, tsr_dot8_fn dot)
{
    for (int32_t o = o0; o < o1; o++) {
        int32_t acc = a->b_proj[o] + dot(a->w_proj + (int64_t)o * a->n_cell, a->hid, a->n_cell);
        int32_t v = tsr_tfl_multiply(acc, a->proj_mul, a->proj_shift) + a->state_zp;
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        if (a->proj_clip > 0)
            v = v > a->proj_clip ? a->proj_clip : v < -a->proj_clip ? -a->proj_clip : v;
        a->h_next[o] = (int8_t)v;
    }
}

/* cells [j0, j1) of a step by the gate rows (tsr_lstm_rows, two at a time by
 * `dot2`) into a->pre, then each cell's update: the optimized libraries' step */
static inline void tsr_lstm_cells_by_rows(const tsr_lstm_args_t *a, int32_t j0, int32_t j1, tsr_dot8x2_fn dot2)
{
    const int32_t gates = a->cifg ? 3 : 4, nc = a->n_cell;
    for (int32_t k = 0; k < gates; k++)
        tsr_lstm_rows(a->w_in, tsr_rnn_wrow(k, j0, nc, a->w_rows, a->w_first), a->b_in, k * nc + j0, a->x,
                      a->n_input, j1 - j0, a->mul_in[k], a->shift_in[k], a->pre, 0, dot2);
    for (int32_t k = 0; k < gates; k++)
        tsr_lstm_rows(a->w_rec, tsr_rnn_wrow(k, j0, nc, a->w_rows, a->w_first), a->b_rec, k * nc + j0, a->h_prev,
                      a->n_output, j1 - j0, a->mul_rec[k], a->shift_rec[k], a->pre, 1, dot2);
    for (int32_t j = j0; j < j1; j++) {
        int32_t pre[4];
        for (int32_t k = 0; k < gates; k++)
            pre[k] = a->pre[k * nc + j];
        tsr_lstm_cell(a, j, pre);
    }
}

#endif /* TESSERA_LSTM_CELL_H */
