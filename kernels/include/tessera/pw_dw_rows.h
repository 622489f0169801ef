/*
 * pointwise -> depthwise fused row-wise with the shifted intermediate
 * buffer (the fusion paper's PW->DW row-wise kernel): the depthwise's
 * output rows in blocks of fd; the buffer holds the pointwise's output rows
 * (all channels, HWC) the block's windows read, at most (fd - 1) * sh + kh.
 * Between blocks the rows the next block still needs (its windows overlap
 * the last one's by kh - sh rows) are shifted to the top of the buffer and
 * only the new rows are computed by the pointwise: no halo recomputed
 * inside a run of blocks.
 *
 * tsr_pw_dw_rows_plan prepares the block of output rows [y, y + n) of the
 * tile described by a (tsr_pw_dw_args_t, kernels.h; a->buf the buffer,
 * a->fd the block height): shifts the kept rows (unless `first`: the
 * previous block, rows [y - a->fd, y), was not computed into this buffer),
 * and fills p, the pointwise of the new rows into the buffer (p->in_h == 0:
 * none), and d, the depthwise of the block from the buffer into its rows of
 * a->dw.out. Run p, then d, with any kernels of the tsr_conv_args_t API.
 */
#ifndef TESSERA_PW_DW_ROWS_H
#define TESSERA_PW_DW_ROWS_H

#include <string.h>

#include "tessera/kernels.h"

/* how the kept rows move to the top of the buffer (to a lower address,
 * overlapping): memmove unless the including library has a faster copy */
#ifndef TSR_PW_DW_ROWS_MOVE
#define TSR_PW_DW_ROWS_MOVE memmove
#endif

/* the block's padded input rows [v0, v1], and [i0, i1] those inside the tile */
static inline void tsr_pw_dw_rows_span(const tsr_conv_args_t *dw, int32_t in_h, int32_t y, int32_t n,
                                       int32_t *v0, int32_t *v1, int32_t *i0, int32_t *i1)
{
    *v0 = y * dw->sh - dw->pad_t;
    *v1 = (y + n - 1) * dw->sh - dw->pad_t + dw->kh - 1;
    *i0 = *v0 > 0 ? *v0 : 0;
    *i1 = *v1 < in_h - 1 ? *v1 : in_h - 1;
}

static inline void tsr_pw_dw_rows_plan(const tsr_pw_dw_args_t *a, int32_t y, int32_t n, int first,
                                       tsr_conv_args_t *p, tsr_conv_args_t *d)
{
    const tsr_conv_args_t *pw = &a->pw, *dw = &a->dw;
    const int32_t H = pw->in_h, C = pw->out_c;
    const size_t row = (size_t)pw->in_w * C;
    int32_t v0, v1, i0, i1, new0 = 0;
    tsr_pw_dw_rows_span(dw, H, y, n, &v0, &v1, &i0, &i1);
    new0 = i0;
    if (!first && y >= a->fd) {
        int32_t pv0, pv1, p0, p1;
        tsr_pw_dw_rows_span(dw, H, y - a->fd, a->fd, &pv0, &pv1, &p0, &p1);
        if (p1 >= i0 && p0 <= i0) {
            /* rows [i0, p1] are in the buffer at row i0 - p0: to the top */
            if (i0 > p0)
                TSR_PW_DW_ROWS_MOVE(a->buf, a->buf + (size_t)(i0 - p0) * row, (size_t)(p1 - i0 + 1) * row);
            new0 = p1 + 1;
        }
    }
    *p = *pw;
    p->in = pw->in + (size_t)new0 * pw->in_w * pw->in_c;
    p->in_h = p->out_h = new0 <= i1 ? i1 - new0 + 1 : 0;
    p->out_w = pw->in_w;
    p->out = a->buf + (size_t)(new0 - i0) * row;
    *d = *dw;
    d->in = a->buf;
    d->in_h = i1 >= i0 ? i1 - i0 + 1 : 0;
    d->in_w = pw->in_w;
    d->in_c = C;
    d->pad_t = i0 - v0;
    d->pad_b = v1 - i1;
    d->out_h = n;
    d->out = (int8_t *)dw->out + (size_t)y * dw->out_w * dw->out_c;
}

#endif /* TESSERA_PW_DW_ROWS_H */
