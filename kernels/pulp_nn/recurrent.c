/*
 * The recurrent step (the IR's lstm) on the PULP cluster: the cores split
 * the cells, each computing its cells' rows of every gate matrix into the
 * gates' pre-activations, then its cells' updates (tessera/lstm_cell.h, TFLite's integer arithmetic);
 * the projection's outputs are split the same way. With Xpulp
 * (TSR_ISA_XPULPV2) four int8 products per pv.sdotsp.b, the input word
 * loaded once for both rows, where rows and vectors are word-aligned.
 */
#include "pnn_common.h"
#include "tessera/lstm_cell.h"
#include "tessera/pulp_nn.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"
#endif

static void dot2(const int8_t *w0, const int8_t *w1, const int8_t *v, int32_t n, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1, k = 0;
#ifdef TSR_ISA_XPULPV2
    if ((((uintptr_t)w0 | (uintptr_t)w1 | (uintptr_t)v) & 3) == 0) {
        const uint32_t *p = (const uint32_t *)w0, *q = (const uint32_t *)w1, *x = (const uint32_t *)v;
        for (; k + 4 <= n; k += 4) {
            uint32_t xv = *x++;
            a0 = xp_sdotsp(a0, xv, *p++);
            a1 = xp_sdotsp(a1, xv, *q++);
        }
    }
#endif
    for (; k < n; k++) {
        a0 += (int32_t)w0[k] * v[k];
        a1 += (int32_t)w1[k] * v[k];
    }
    *s0 = a0;
    *s1 = a1;
}

static int32_t dot(const int8_t *w, const int8_t *v, int32_t n)
{
    int32_t s0 = 0, s1 = 0;
    dot2(w, w, v, n, &s0, &s1);
    return s0;
}

void pnn_lstm_step(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t j0, j1;
    tsr_rnn_share(a->n_cell, a->cell0, a->cell1, core, ncores, &j0, &j1);
    tsr_lstm_cells_by_rows(a, j0, j1, dot2);
}

void pnn_lstm_project(const tsr_lstm_args_t *a, int core, int ncores)
{
    int32_t o0, o1;
    tsr_rnn_share(a->n_output, 0, 0, core, ncores, &o0, &o1);
    tsr_lstm_projection(a, o0, o1, dot);
}

/* ---- ONNX's LSTM and GRU (tessera/onnx_rnn_cell.h): the cells over the
 * cores, pv.sdotsp.b for the input weights' sums ------------------------- */

#include "tessera/onnx_rnn_cell.h"

static int32_t dot16(const int8_t *r, const int16_t *h, int32_t n)
{
    int32_t s = 0;
    for (int32_t k = 0; k < n; k++)
        s += (int32_t)r[k] * h[k];
    return s;
}

void pnn_onnx_rnn_step(const tsr_onnx_rnn_args_t *a, int core, int ncores)
{
    int32_t j0, j1;
    tsr_rnn_share(a->n_cell, a->cell0, a->cell1, core, ncores, &j0, &j1);
    tsr_onnx_cells(a, j0, j1, dot, dot16);
}
