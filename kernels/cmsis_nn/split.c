/*
 * Split reductions on Cortex-M (tessera/cmsis_nn.h): tsr_split_step's
 * arithmetic (kernels/reference/split.c) with the DSP extension's dual
 * 16-bit multiply-accumulate: four inputs plus the offset widen into two
 * words of int16 lanes (sxtab16), each of four channels' four weights into
 * two more (sxtb16), and two smlad add the four products. Bit-exact with
 * the reference: the same int32 sums (an input plus the offset fits an
 * int16 lane: the code generator calls this only for offsets in
 * [-32640, 32639]).
 */
#include "tessera/cmsis_nn.h"
#include "tessera/split.h"
#include "tsr_dsp.h"

/* acc[0..m) += the run of n inputs (plus off) times m channels' weights,
 * whose rows are `block` apart */
static void split_mac(int32_t *acc, int32_t m, const int8_t *x, const int8_t *w0, int32_t block, int32_t n,
                      int32_t off)
{
    const int32_t off2 = (int32_t)(((uint32_t)(uint16_t)off) | ((uint32_t)(uint16_t)off << 16));
    int32_t k = 0, q;
    if (m == 4) {
        const int8_t *w1 = w0 + block, *w2 = w1 + block, *w3 = w2 + block;
        int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
        for (; k + 4 <= n; k += 4) {
            const uint32_t xv = tsr_ld32(x + k);
            const int32_t x02 = tsr_sxtab16(off2, xv), x13 = tsr_sxtab16_ror8(off2, xv);
            uint32_t wv = tsr_ld32(w0 + k);
            a0 = tsr_smlad(tsr_sxtb16(wv), x02, a0);
            a0 = tsr_smlad(tsr_sxtb16_ror8(wv), x13, a0);
            wv = tsr_ld32(w1 + k);
            a1 = tsr_smlad(tsr_sxtb16(wv), x02, a1);
            a1 = tsr_smlad(tsr_sxtb16_ror8(wv), x13, a1);
            wv = tsr_ld32(w2 + k);
            a2 = tsr_smlad(tsr_sxtb16(wv), x02, a2);
            a2 = tsr_smlad(tsr_sxtb16_ror8(wv), x13, a2);
            wv = tsr_ld32(w3 + k);
            a3 = tsr_smlad(tsr_sxtb16(wv), x02, a3);
            a3 = tsr_smlad(tsr_sxtb16_ror8(wv), x13, a3);
        }
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        tsr_split_mac4_from(acc, x, w0, block, k, n, off);   /* the tail in registers */
        return;
    }
    for (q = 0; q < m; q++) {
        const int8_t *w = w0 + (size_t)q * block;
        int32_t a = acc[q];
        for (k = 0; k + 4 <= n; k += 4) {
            const uint32_t xv = tsr_ld32(x + k), wv = tsr_ld32(w + k);
            a = tsr_smlad(tsr_sxtb16(wv), tsr_sxtab16(off2, xv), a);
            a = tsr_smlad(tsr_sxtb16_ror8(wv), tsr_sxtab16_ror8(off2, xv), a);
        }
        acc[q] = a;
    }
    tsr_split_mac_from(acc, m, x, w0, block, n & ~3, n, off);
}

void tsr_cmsis_split_step(const tsr_split_args_t *s, int core, int ncores)
{
    if (core == 0)      /* one core on Cortex-M */
        tsr_split_share(s, 0, 1, 1, split_mac);
    (void)ncores;
}
