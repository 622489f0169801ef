/*
 * Table lookups (tsr_lut_args_t: sigmoid, tanh, hard swish and the other
 * activations the importers turn into 256-entry tables) on the Cortex-M
 * cores. Written for tessera. The reference kernel (tsr_lut) does one byte
 * per turn of a loop; here a word of four inputs is loaded once, each byte
 * sign-extended in place (sxtb with a rotation) indexes the table from its
 * middle entry (table + 128: x + 128 without the add), and the four results
 * are stored as one word. Per-channel tables (a table per channel) stay on
 * the reference kernel.
 */
#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_dsp.h"

void tsr_cmsis_lut(const tsr_lut_args_t *a, int core, int ncores)
{
    (void)ncores;
    if (core != 0)
        return;
    if (a->per_channel) {
        tsr_lut(a, 0, 1);
        return;
    }
    const uint8_t *t = (const uint8_t *)a->table + 128;
    const int8_t *x = a->in;
    int8_t *y = a->out;
    int32_t n = a->pixels * a->c;
    for (; n >= 8; n -= 8, x += 8, y += 8) {
        const uint32_t v = tsr_ld32(x), w = tsr_ld32(x + 4);
        tsr_st32(y, t[(int8_t)v] | (uint32_t)t[(int8_t)(v >> 8)] << 8 | (uint32_t)t[(int8_t)(v >> 16)] << 16 |
                        (uint32_t)t[(int8_t)(v >> 24)] << 24);
        tsr_st32(y + 4, t[(int8_t)w] | (uint32_t)t[(int8_t)(w >> 8)] << 8 | (uint32_t)t[(int8_t)(w >> 16)] << 16 |
                            (uint32_t)t[(int8_t)(w >> 24)] << 24);
    }
    for (; n > 0; n--)
        *y++ = (int8_t)t[*x++];
}
