/*
 * Split reductions on the PULP cluster (tessera/pulp_nn.h): the walk of
 * tessera/split.h with Xpulpv2's 4-way int8 dot product (pv.sdotsp.b)
 * where the input offset is 0 (pointwise and linear layers fold it into
 * their bias: codegen/libraries/pulp_nn.py folds_offset), four channels'
 * weight words against one input word; portable C otherwise. The cores
 * share the tile's pixels, or its channels in multiples of 4.
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#include "tessera/split.h"
#ifdef TSR_ISA_XPULPV2
#include "xpulp.h"
#endif

static void split_mac(int32_t *acc, int32_t m, const int8_t *x, const int8_t *w0, int32_t block, int32_t n,
                      int32_t off)
{
#ifdef TSR_ISA_XPULPV2
    int32_t k = 0;
    if (off == 0 && m == 4) {
        const int8_t *w1 = w0 + block, *w2 = w1 + block, *w3 = w2 + block;
        int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
        for (; k + 4 <= n; k += 4) {
            const uint32_t xv = xp_lw(x + k);
            a0 = xp_sdotsp(a0, xv, xp_lw(w0 + k));
            a1 = xp_sdotsp(a1, xv, xp_lw(w1 + k));
            a2 = xp_sdotsp(a2, xv, xp_lw(w2 + k));
            a3 = xp_sdotsp(a3, xv, xp_lw(w3 + k));
        }
        acc[0] = a0;
        acc[1] = a1;
        acc[2] = a2;
        acc[3] = a3;
        tsr_split_mac_from(acc, 4, x, w0, block, k, n, 0);
        return;
    }
#endif
    tsr_split_mac_from(acc, m, x, w0, block, 0, n, off);
}

void pnn_split_step(const tsr_split_args_t *s, int core, int ncores)
{
    tsr_split_share(s, core, ncores, 4, split_mac);
}
