/*
 * The out-of-core interpreter (kernels/include/tessera/program.h) on the
 * host HAL's storage driver, with a hand-made program: two reads into the
 * pools, a wait, a compute whose gather copies them to "L1", a write from
 * the out pool, then (argv[2]) a fault: "order" asks for a tile out of the
 * program's order, "wait" has a WAIT for a request never issued.
 * Prints what it read and wrote, and the interpreter's counts.
 */
#include <stdio.h>

#define TSR_PROGRAM_IMPL
#include "tessera/program.h"

static int8_t pools[64];
static const tsr_op_t ops_ok[] = {
    {TSR_OP_READ, TSR_POOL_IN, 0, 0, 4, 3, 0},      /* card[4:7] -> in[0:3] */
    {TSR_OP_READ, TSR_POOL_W, 0, 8, 0, 2, 0},       /* card[0:2] -> w[8:10] */
    {TSR_OP_WAIT, 0, 0, 1, 0, 0, 0},
    {TSR_OP_COMPUTE, 0, 0, 0, 0, 2, 4},
    {TSR_OP_WRITE, 0, 0, 4, 16, 3, 0},              /* out[4:7] -> card[16:19] */
    {TSR_OP_WAIT, 0, 0, 2, 0, 0, 0},
};
static const tsr_op_t ops_wait[] = {
    {TSR_OP_READ, TSR_POOL_IN, 0, 0, 4, 3, 0},
    {TSR_OP_WAIT, 0, 0, 1, 0, 0, 0},                /* request 1 was never issued */
    {TSR_OP_COMPUTE, 0, 0, 0, 0, 0, 0},
};
static const tsr_ref_t refs[] = {{TSR_POOL_IN, 0, 0, 0, 3}, {TSR_POOL_W, TSR_KIND_WEIGHTS, 0, 8, 2}};
static const uint16_t tiles[] = {1};
static const uint8_t level[] = {0};
#ifdef FAULT_WAIT
const tsr_program_t tsr_program = {ops_wait, 3, refs, tiles, level, {pools, pools + 8, pools + 32}};
#else
const tsr_program_t tsr_program = {ops_ok, 6, refs, tiles, level, {pools, pools + 8, pools + 32}};
#endif

int main(int argc, char **argv)
{
    int8_t in[3], w[2];
    int8_t *dst[TSR_KINDS] = {0};
    const tsr_op_t *c;
    int k;
    (void)argc;
    (void)ops_wait;
    (void)ops_ok;
    if (hal_storage_open(argv[1]) != 0)
        return 2;
    tsr_prog_begin();
#ifdef FAULT_ORDER
    c = tsr_prog_compute(0, 1);
#else
    c = tsr_prog_compute(0, 0);
#endif
    dst[0] = in;
    dst[TSR_KIND_WEIGHTS] = w;
    tsr_prog_gather(c, dst, 1, 0);
    for (k = 0; k < 3; k++)     /* the "compute": out = in + w[0] */
        tsr_program.pool[TSR_POOL_OUT][c->c + k] = (int8_t)(in[k] + w[0]);
    tsr_prog_end();
    printf("in=%d,%d,%d w=%d,%d ops=%lu,%lu,%lu,%lu\n", in[0], in[1], in[2], w[0], w[1],
           (unsigned long)tsr_prog_counts[0], (unsigned long)tsr_prog_counts[1], (unsigned long)tsr_prog_counts[2],
           (unsigned long)tsr_prog_counts[3]);
    return 0;
}
