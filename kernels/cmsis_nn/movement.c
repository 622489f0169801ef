/*
 * The transpose, CMSIS-NN style (tessera/transpose.h): the reference
 * kernel's rows and results, runs copied in words and 4x4 blocks transposed
 * in registers, with ARMv7-M's word loads and stores at any alignment.
 */
#include "tessera/cmsis_nn.h"
#include "tsr_dsp.h"
#define TSR_TP_LD32(p) tsr_ld32(p)
#define TSR_TP_ST32(p, v) tsr_st32((p), (v))
#include "tessera/transpose.h"

void tsr_cmsis_transpose(const tsr_transpose_args_t *a, int core, int ncores)
{
    int32_t r0, r1;
    tsr_tp_share(a, core, ncores, &r0, &r1);
    tsr_tp_rows(a, r0, r1);
}
