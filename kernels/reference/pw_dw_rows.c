/*
 * Reference pointwise -> depthwise fused row-wise with the shifted
 * intermediate buffer (see tessera/pw_dw_rows.h and kernels.h): each core
 * takes its share of the depthwise's output rows, in blocks of fd, in its
 * own buffer of (fd - 1) * sh + kh pointwise rows (all channels); inside a
 * core's run only the rows a block adds are computed, the reference
 * pointwise and depthwise on one core each. No barrier: each core reads
 * only the rows it wrote.
 */
#include "ref_common.h"
#include "tessera/pw_dw_rows.h"

void tsr_pw_dw_rows(const tsr_pw_dw_args_t *a, int core, int ncores)
{
    const int32_t fd = a->fd > 0 ? a->fd : 1;
    const size_t rows = (size_t)(fd - 1) * a->dw.sh + a->dw.kh;
    tsr_pw_dw_args_t mine = *a;
    tsr_conv_args_t p, d;
    int32_t r0, r1, y, n;

    mine.fd = fd;
    mine.buf = a->buf + (size_t)core * rows * a->pw.in_w * a->pw.out_c;
    tsr_ref_share(a->dw.out_h, core, ncores, &r0, &r1);
    for (y = r0; y < r1; y += n) {
        n = r1 - y < fd ? r1 - y : fd;
        tsr_pw_dw_rows_plan(&mine, y, n, y == r0, &p, &d);
        if (p.in_h > 0)
            tsr_pointwise(&p, 0, 1);
        tsr_depthwise(&d, 0, 1);
    }
}
