/*
 * The transpose on the cluster, PULP-NN style (tessera/transpose.h): the
 * reference kernel's rows over the cores, runs copied in words and 4x4
 * blocks transposed in registers, loads and stores at any alignment
 * (Xpulp's cores handle misaligned words; the portable build uses memcpy).
 */
#include <string.h>

#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"
#define TSR_TP_LD32(p) xp_lw(p)
#define TSR_TP_ST32(p, v) xp_sw((p), (v))
#else
static inline uint32_t pnn_tp_ld32(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline void pnn_tp_st32(int8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
#define TSR_TP_LD32(p) pnn_tp_ld32(p)
#define TSR_TP_ST32(p, v) pnn_tp_st32((p), (v))
#endif
#include "tessera/transpose.h"

void pnn_transpose(const tsr_transpose_args_t *a, int core, int ncores)
{
    int32_t r0, r1;
    tsr_tp_share(a, core, ncores, &r0, &r1);
    tsr_tp_rows(a, r0, r1);
}
