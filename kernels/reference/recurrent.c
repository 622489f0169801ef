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
    tsr_rnn_share(a->n_cell, a->cell0, a->cell1, core, ncores, &j0, &j1);
    tsr_lstm_cells(a, j0, j1, dot_ref);
}

void tsr_lstm_project(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t o0, o1;
    tsr_rnn_share(a->n_output, 0, 0, core, ncores, &o0, &o1);
    tsr_lstm_projection(a, o0, o1, dot_ref);
}

/* ---- ONNX's LSTM and GRU (tsr_onnx_rnn_args_t, tessera/onnx_rnn_cell.h) --- */

#include "tessera/onnx_rnn_cell.h"

static int32_t dot16_ref(const int8_t *r, const int16_t *h, int32_t n)
{
    int32_t s = 0;
    for (int32_t k = 0; k < n; k++)
        s += (int32_t)r[k] * h[k];
    return s;
}

void tsr_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores)
{
    int32_t j0, j1;
    tsr_rnn_share(a->n_cell, a->cell0, a->cell1, core, ncores, &j0, &j1);
    tsr_onnx_cells(a, j0, j1, dot_ref, dot16_ref);
}
