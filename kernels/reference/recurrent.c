/*
 * Reference recurrent step (the IR's lstm): one time step, the cells split
 * over the cores (tessera/lstm_cell.h has the arithmetic), then the
 * projection, if any, split over the outputs.
 */
#include "ref_common.h"
#include "tessera/lstm_cell.h"

static int32_t dot_ref(const int8_t *w, const int8_t *v, int32_t n)
{
    int32_t s = 0;
    for (int32_t k = 0; k < n; k++)
        s += (int32_t)w[k] * v[k];
    return s;
}

void tsr_lstm_step(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t j0, j1;
    tsr_ref_share(a->n_cell, core, ncores, &j0, &j1);
    tsr_lstm_cells(a, j0, j1, dot_ref);
}

void tsr_lstm_project(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t o0, o1;
    tsr_ref_share(a->n_output, core, ncores, &o0, &o1);
    tsr_lstm_projection(a, o0, o1, dot_ref);
}

/* ---- ONNX's LSTM and GRU (tsr_onnx_rnn_args_t) ---------------------------- */

#include "tessera/fixed32.h"

static int64_t rq64(int64_t acc, int32_t mul, int32_t shift)
{
    acc *= mul;
    return shift > 0 ? (acc + ((int64_t)1 << (shift - 1))) >> shift : acc;
}

static int32_t sat32(int64_t v)
{
    return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

static int32_t onnx_px(const tsr_onnx_rnn_args_t *a, int32_t row)
{
    const int8_t *w = a->w_in + (int64_t)row * a->n_input;
    int32_t acc = 0;
    for (int32_t k = 0; k < a->n_input; k++)
        acc += ((int32_t)a->x[k] - a->zp_x) * ((int32_t)w[k] - a->zp_w);
    return (int32_t)rq64(acc, a->mul_x, a->shift_x);
}

static int32_t onnx_ph(const tsr_onnx_rnn_args_t *a, int32_t row)
{
    const int8_t *r = a->w_rec + (int64_t)row * a->n_cell;
    int32_t acc = 0;
    for (int32_t k = 0; k < a->n_cell; k++)
        acc += ((int32_t)r[k] - a->zp_r) * a->h_prev[k];
    return (int32_t)rq64(acc, a->mul_h, a->shift_h);
}

void tsr_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores)
{
    int32_t j0, j1, H = a->n_cell;
    tsr_ref_share(H, core, ncores, &j0, &j1);
    for (int32_t j = j0; j < j1; j++) {
        int32_t h;
        if (a->gru) {
            int32_t z = tsr_sigmoid32(sat32((int64_t)onnx_px(a, j) + onnx_ph(a, j) + a->b_in[j] + a->b_rec[j]), 8);
            int32_t r = tsr_sigmoid32(sat32((int64_t)onnx_px(a, H + j) + onnx_ph(a, H + j) + a->b_in[H + j]
                                            + a->b_rec[H + j]), 8);
            int32_t rh = tsr_tfl_srdhm(r, sat32((int64_t)onnx_ph(a, 2 * H + j) + a->b_rec[2 * H + j]));
            int32_t n = tsr_tanh32(sat32((int64_t)onnx_px(a, 2 * H + j) + a->b_in[2 * H + j] + rh), 8);
            int64_t h31 = (int64_t)tsr_tfl_srdhm(INT32_MAX - z, n) + tsr_tfl_srdhm(z, (int32_t)a->h_prev[j] * 65536);
            /* RoundingDivideByPOT(h31, 16) of the 33-bit sum */
            h = (int32_t)(h31 >> 16) + ((h31 & 0xFFFF) > 0x7FFF + (h31 < 0) ? 1 : 0);
        } else {
            int32_t p[4];
            for (int32_t k = 0; k < 4; k++)
                p[k] = sat32((int64_t)onnx_px(a, k * H + j) + onnx_ph(a, k * H + j) + a->b_in[k * H + j]
                             + a->b_rec[k * H + j]);
            int32_t i = tsr_sigmoid32(p[0], 8), o = tsr_sigmoid32(p[1], 8), f = tsr_sigmoid32(p[2], 8);
            int32_t g = tsr_tanh32(p[3], 8);
            a->c[j] = sat32((int64_t)tsr_tfl_srdhm(f, a->c[j]) + tsr_tfl_rdbpot(tsr_tfl_srdhm(i, g), 8));
            h = tsr_tfl_rdbpot(tsr_tfl_srdhm(o, tsr_tanh32(a->c[j], 8)), 16);
        }
        h = h < -32768 ? -32768 : h > 32767 ? 32767 : h;
        a->h_next[j] = (int16_t)h;
        if (a->y) {
            int64_t v = rq64(h, a->mul_y, a->shift_y) + a->zp_y;
            a->y[j] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
        }
    }
}
