/*
 * The recurrent step (the IR's lstm) on the Cortex-M DSP: the gate matrices'
 * rows two at a time, four int8 products per SMLAD pair (the input word
 * sign-extended once for both rows), into the gates' pre-activations; then
 * each cell's update (tessera/lstm_cell.h, TFLite's integer arithmetic).
 * The cores (one on a Cortex-M) split the cells, then the projection's
 * outputs.
 */
#include "tessera/cmsis_nn.h"
#include "tessera/lstm_cell.h"
#include "tsr_dsp.h"

static void dot2_dsp(const int8_t *w0, const int8_t *w1, const int8_t *v, int32_t n, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1, k = 0;
    for (; k + 4 <= n; k += 4) {
        uint32_t x = tsr_ld32(v + k), p = tsr_ld32(w0 + k), q = tsr_ld32(w1 + k);
        int32_t xe = tsr_sxtb16(x), xo = tsr_sxtb16_ror8(x);
        a0 = tsr_smlad(tsr_sxtb16(p), xe, a0);
        a0 = tsr_smlad(tsr_sxtb16_ror8(p), xo, a0);
        a1 = tsr_smlad(tsr_sxtb16(q), xe, a1);
        a1 = tsr_smlad(tsr_sxtb16_ror8(q), xo, a1);
    }
    for (; k < n; k++) {
        a0 += (int32_t)w0[k] * v[k];
        a1 += (int32_t)w1[k] * v[k];
    }
    *s0 = a0;
    *s1 = a1;
}

static int32_t dot_dsp(const int8_t *w, const int8_t *v, int32_t n)
{
    int32_t s = 0, k = 0;
    for (; k + 4 <= n; k += 4) {
        uint32_t x = tsr_ld32(v + k), p = tsr_ld32(w + k);
        s = tsr_smlad(tsr_sxtb16(p), tsr_sxtb16(x), s);
        s = tsr_smlad(tsr_sxtb16_ror8(p), tsr_sxtb16_ror8(x), s);
    }
    for (; k < n; k++)
        s += (int32_t)w[k] * v[k];
    return s;
}

void tsr_cmsis_lstm_step(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t j0, j1;
    tsr_rnn_share(a->n_cell, a->cell0, a->cell1, core, ncores, &j0, &j1);
    tsr_lstm_cells_by_rows(a, j0, j1, dot2_dsp);
}

void tsr_cmsis_lstm_project(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t o0, o1;
    tsr_rnn_share(a->n_output, 0, 0, core, ncores, &o0, &o1);
    tsr_lstm_projection(a, o0, o1, dot_dsp);
}

/* ---- ONNX's LSTM and GRU (tessera/onnx_rnn_cell.h): SMLAD for both sums -- */

#include "tessera/onnx_rnn_cell.h"

/* int8 weights times the int16 hidden state: the weights sign-extended in
 * (0, 2) and (1, 3) lanes, the state's pairs packed to match */
static int32_t dot16_dsp(const int8_t *r, const int16_t *h, int32_t n)
{
    int32_t s = 0, k = 0;
    for (; k + 4 <= n; k += 4) {
        uint32_t w = tsr_ld32(r + k), h01 = tsr_ld32(h + k), h23 = tsr_ld32(h + k + 2);
        s = tsr_smlad(tsr_sxtb16(w), (int32_t)((h01 & 0xFFFFu) | (h23 << 16)), s);
        s = tsr_smlad(tsr_sxtb16_ror8(w), (int32_t)((h01 >> 16) | (h23 & 0xFFFF0000u)), s);
    }
    for (; k < n; k++)
        s += (int32_t)r[k] * h[k];
    return s;
}

static int32_t dot8_dsp(const int8_t *w, const int8_t *x, int32_t n)
{
    return dot_dsp(w, x, n);
}

void tsr_cmsis_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores)
{
    int32_t j0, j1;
    tsr_rnn_share(a->n_cell, a->cell0, a->cell1, core, ncores, &j0, &j1);
    tsr_onnx_cells(a, j0, j1, dot8_dsp, dot16_dsp);
}
