/*
 * The cells of one step of ONNX's LSTM or GRU (tsr_onnx_rnn_args_t in
 * tessera/kernels.h, golden/recurrent.py onnx_cell), shared by every kernel
 * library: each passes its own int8 x int8 and int8 x int16 dot products
 * (plain C, SMLAD, Xpulp) and its own split of the cells. The zero points
 * come out of the sums: sum (x - zx)(w - zw) = sum x w - zw sum x - zx sum w
 * + n zx zw, with sum w per row from the layer's constants (w_sums), and
 * sum (r - zr) h = sum r h - zr sum h; sum x and sum h once per call.
 */
#ifndef TESSERA_ONNX_RNN_CELL_H
#define TESSERA_ONNX_RNN_CELL_H

#include <stdint.h>

#include "tessera/fixed32.h"
#include "tessera/kernels.h"

typedef int32_t (*tsr_onnx_dot8_fn)(const int8_t *w, const int8_t *x, int32_t n);
typedef int32_t (*tsr_onnx_dot16_fn)(const int8_t *r, const int16_t *h, int32_t n);

static inline int64_t tsr_onnx_rq(int64_t acc, int32_t mul, int32_t shift)
{
    acc *= mul;
    return shift > 0 ? (acc + ((int64_t)1 << (shift - 1))) >> shift : acc;
}

static inline int32_t tsr_onnx_sat32(int64_t v)
{
    return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

static inline void tsr_onnx_cells(const tsr_onnx_rnn_args_t *a, int32_t j0, int32_t j1, tsr_onnx_dot8_fn dot8,
                                  tsr_onnx_dot16_fn dot16)
{
    const int32_t H = a->n_cell, F = a->n_input;
    int32_t sum_x = 0, sum_h = 0;
    for (int32_t k = 0; k < F; k++)
        sum_x += a->x[k];
    for (int32_t k = 0; k < H; k++)
        sum_h += a->h_prev[k];
    const int32_t fixed = F * a->zp_x * a->zp_w - a->zp_w * sum_x;
    for (int32_t j = j0; j < j1; j++) {
        int32_t p[4], h;
        int64_t cand = 0;
        for (int32_t k = 0; k < (a->gru ? 3 : 4); k++) {
            int32_t row = k * H + j, wrow = tsr_rnn_wrow(k, j, H, a->w_rows, a->w_first);
            int32_t ax = dot8(a->w_in + (int64_t)wrow * F, a->x, F) - a->zp_x * a->w_sums[row] + fixed;
            int32_t ah = dot16(a->w_rec + (int64_t)wrow * H, a->h_prev, H) - a->zp_r * sum_h;
            int64_t px = tsr_onnx_rq(ax, a->mul_x, a->shift_x), ph = tsr_onnx_rq(ah, a->mul_h, a->shift_h);
            if (a->gru && k == 2) {      /* the candidate: r scales its recurrent part */
                cand = px + a->b_in[row];
                p[2] = tsr_onnx_sat32(ph + a->b_rec[row]);
            } else {
                p[k] = tsr_onnx_sat32(px + ph + a->b_in[row] + a->b_rec[row]);
            }
        }
        if (a->gru) {
            int32_t z = tsr_sigmoid32(p[0], 8), r = tsr_sigmoid32(p[1], 8);
            int32_t n = tsr_tanh32(tsr_onnx_sat32(cand + tsr_tfl_srdhm(r, p[2])), 8);
            int64_t h31 = (int64_t)tsr_tfl_srdhm(INT32_MAX - z, n) + tsr_tfl_srdhm(z, (int32_t)a->h_prev[j] * 65536);
            /* RoundingDivideByPOT(h31, 16) of the 33-bit sum */
            h = (int32_t)(h31 >> 16) + ((h31 & 0xFFFF) > 0x7FFF + (h31 < 0) ? 1 : 0);
        } else {   /* i, o, f, c */
            int32_t i = tsr_sigmoid32(p[0], 8), o = tsr_sigmoid32(p[1], 8), f = tsr_sigmoid32(p[2], 8);
            int32_t g = tsr_tanh32(p[3], 8);
            a->c[j] = tsr_onnx_sat32((int64_t)tsr_tfl_srdhm(f, a->c[j]) + tsr_tfl_rdbpot(tsr_tfl_srdhm(i, g), 8));
            h = tsr_tfl_rdbpot(tsr_tfl_srdhm(o, tsr_tanh32(a->c[j], 8)), 16);
        }
        h = h < -32768 ? -32768 : h > 32767 ? 32767 : h;
        a->h_next[j] = (int16_t)h;
        if (a->y) {
            int64_t v = tsr_onnx_rq(h, a->mul_y, a->shift_y) + a->zp_y;
            a->y[j] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
        }
    }
}

#endif /* TESSERA_ONNX_RNN_CELL_H */
