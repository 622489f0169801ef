/*
 * Split reductions (tessera.tiler: one output's reduction does not fit the
 * tile level): a step adds one chunk of input channels' products into the
 * output tile's int32 accumulators; the first chunk starts from the bias,
 * the last requantizes into the output tile (tessera/split.h: the walk).
 * The sums are the unsplit kernels' (int32 addition in another order: the
 * same value), so the output is bit-exact with them and the golden model.
 */
#include "ref_common.h"
#include "tessera/split.h"

/* acc[0..m) += the run of n inputs (plus off) times m channels' weights,
 * whose rows are `block` apart: 4 channels share each input load. */
static void split_mac(int32_t *acc, int32_t m, const int8_t *x, const int8_t *w0, int32_t block, int32_t n,
                      int32_t off)
{
    if (m == 4) {
        tsr_split_mac4_from(acc, x, w0, block, 0, n, off);
        return;
    }
    tsr_split_mac_from(acc, m, x, w0, block, 0, n, off);
}

void tsr_split_step(const tsr_split_args_t *s, int core, int ncores)
{
    tsr_split_share(s, core, ncores, 1, split_mac);
}
