/*
 * linear (fully connected): the whole input tile in HWC order times weights
 * [out_c][in_h * in_w * in_c]; the output is 1 x 1 x out_c. One input row,
 * so the cores split the output channels (PULP-NN's linear kernels), in
 * multiples of 4 for the 4x1 blocking.
 *
 * With Xpulpv2, whole words and the usual requantization: up to four
 * 4-channel blocks per asm block of nested hardware loops (loop 1 over the
 * blocks, loop 0 over K / 4: one input word against four weight words,
 * nine instructions per 16 MACs), each block's four outputs requantized
 * as the pointwise's (xpulp.h XP_RQ4) and stored as one word. The records
 * of a group of blocks live on the core's stack.
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"

/* loop 1's body: 9 set-up, lp.setup, 9 in loop 0, 20 of requantization,
 * the clamp, 2 packs, the record step, the store */
#define LN_OUTER(clamp_len) (9 + 1 + 9 + 20 + (clamp_len) + 4)
#define LN_BLOCKS(CLAMP, CLAMP_LEN)                                                                     \
    __asm__ volatile(".option push\n\t.option norvc\n\t.option norelax\n\t.Lln_set%=:\n\t"             \
                     ".insn i 0x7B, 4, x1, %[nb], " XP_XSTR(2 * LN_OUTER(CLAMP_LEN)) "\n\t"                 \
                     "mv s10, %[q3]\n\tadd s11, s10, %[K]\n\tadd t5, s11, %[K]\n\tadd %[q3], t5, %[K]\n\t" \
                     "mv t4, %[x]\n\t"                                                                     \
                     "lw s2, 0(%[rec])\n\tlw s4, 4(%[rec])\n\tlw s6, 8(%[rec])\n\tlw s8, 12(%[rec])\n\t"   \
                     ".insn i 0x7B, 4, x0, %[n], 18\n\t"                                                    \
                     XP_LW_INC("t0", "t4") XP_LW_INC("t2", "s10") XP_LW_INC("t3", "s11")                  \
                     XP_SDOTSP("s2", "t0", "t2") XP_LW_INC("t2", "t5") XP_SDOTSP("s4", "t0", "t3")          \
                     XP_LW_INC("t3", "%[q3]") XP_SDOTSP("s6", "t0", "t2") XP_SDOTSP("s8", "t0", "t3")       \
                     XP_RQ4("%[rec]") CLAMP                                                              \
                     XP_PACKLO("t0", "s4", "s2") XP_PACKHI("t0", "s8", "s6")                               \
                     "addi %[rec], %[rec], 72\n\t"                                                        \
                     ".Lln_end%=:\n\t" XP_SW_INC4("t0", "%[y]")                                          \
                     ".if .Lln_end%= - .Lln_set%= != 4 * " XP_XSTR(LN_OUTER(CLAMP_LEN)) "\n\t"                \
                     ".error \"hardware loop length\"\n\t.endif\n\t.option pop"                               \
                     : [q3] "+r"(q3), [rec] "+r"(rp), [y] "+r"(y)                                         \
                     : [nb] "r"(nb), [n] "r"(K >> 2), [K] "r"(K), [x] "r"(a->in)                           \
                     : "t0", "t2", "t3", "t4", "t5", "t6", "s2", "s4", "s6", "s8", "s10", "s11", "memory")

/* Channels [c0, c1) (a multiple of 4) with the asm blocks; the first
 * channel it did not compute (one with the general requantization). */
static __attribute__((noinline)) int32_t linear_xpulp(const tsr_conv_args_t *a, int32_t c0, int32_t c1)
{
    const int32_t K = a->in_h * a->in_w * a->in_c;
    const int ok = xp_rq_usual(a->rq);
    xp_rec4_t rec[4];
    int32_t c = c0, nb, j;
    while (c < c1) {
        const int8_t *q3 = a->weights + (size_t)c * K;
        const xp_rec4_t *rp = rec;
        int8_t *y = (int8_t *)a->out + c;
        nb = (c1 - c) >> 2;
        if (nb > 4)
            nb = 4;
        for (j = 0; j < nb; j++)
            if (!pnn_xp_record4(a, c + 4 * j, K, ok, &rec[j]) || rec[j].lo != rec[0].lo || rec[j].hi != rec[0].hi)
                return c;
        if (rec[0].lo == -128 && rec[0].hi == 127)
            LN_BLOCKS(XP_CLIP8X4, XP_CLIP8X4_LEN);
        else
            LN_BLOCKS(XP_MINMAX4("%[rec]"), XP_MINMAX4_LEN);
        c += 4 * nb;
    }
    return c;
}
#endif

void pnn_linear(const tsr_conv_args_t *a, int core, int ncores)
{
    int32_t c0, c1;
    pnn_chunk(a->out_c, 4, core, ncores, &c0, &c1);
    if (c0 >= c1)
        return;
#ifdef TSR_ISA_XPULPV2
    {
        const int32_t K = a->in_h * a->in_w * a->in_c;
        if (a->rq && (K & 3) == 0 && ((a->out_c | c0) & 3) == 0 && (((uintptr_t)a->in | (uintptr_t)a->weights
                                                                      | (uintptr_t)a->out) & 3) == 0)
            c0 += (linear_xpulp(a, c0, c0 + ((c1 - c0) & ~3)) - c0);
        if (c0 >= c1)
            return;
    }
#endif
    pnn_matmul(a->in, NULL, a->in_h * a->in_w * a->in_c, a->weights, a->bias, c0, c1,
               a->input_offset, a->out, 0, 0, a->rq);
}
