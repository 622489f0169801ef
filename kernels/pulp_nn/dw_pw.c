/*
 * depthwise -> pointwise fused row-wise (API: tsr_dw_pw in kernels.h) on
 * this library's own kernels: each core takes its share of the band's
 * output rows and, fd rows at a time, runs pnn_depthwise on that block
 * (alone, as one core: all channels, its own stripe scratch) into its own
 * intermediate buffer, then pnn_pointwise over the block. HWC everywhere:
 * the depthwise's vertical stripes are gathered out of the HWC input by the
 * cores anyway (see depthwise.c), and the pointwise's 4x2 matmul wants HWC
 * pixels, so the intermediate stays HWC. A per-core block needs no barrier
 * between the two halves.
 *
 * dw.scratch holds ncores stripe buffers of dw.scratch_bytes each, at least
 * ((fd - 1) * sh + kh) * kw (smaller: the direct depthwise loop runs).
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"

/* A pair for the shared scheme's two forks' arguments, for callers with
 * no room on their stack. The generated steps keep theirs on the step's
 * stack instead: here it would be in L2 on PULP-open, and every core reads
 * the fields per channel and per row (both forks 7% to 12% slower on
 * GVSoC). */
tsr_conv_args_t pnn_dw_pw_parts[2];

/* The arguments of one block of the shared scheme (see pulp_nn.h): output
 * rows [y, y + n) of the band, all channels. d: the depthwise of the block's
 * input rows (halo included, the band's own padding where the block touches
 * it) into a->buf, HWC; p: the pointwise of a->buf into those rows of the
 * band's output. */
void pnn_dw_pw_block(const tsr_dw_pw_args_t *a, int32_t y, int32_t n, tsr_conv_args_t *d, tsr_conv_args_t *p)
{
    const tsr_conv_args_t *dw = &a->dw;
    const int32_t v0 = y * dw->sh - dw->pad_t, v1 = (y + n - 1) * dw->sh - dw->pad_t + dw->kh - 1;
    const int32_t i0 = v0 > 0 ? v0 : 0, i1 = v1 < dw->in_h - 1 ? v1 : dw->in_h - 1;
    *d = *dw;
    d->in = dw->in + (size_t)i0 * dw->in_w * dw->in_c;
    d->in_h = i1 - i0 + 1;
    d->pad_t = i0 - v0;
    d->pad_b = v1 - i1;
    d->out_h = n;
    d->out = a->buf;
    *p = a->pw;
    p->in = a->buf;
    p->in_h = n;
    p->in_w = dw->out_w;
    p->in_c = dw->out_c;
    p->out_w = dw->out_w;
    p->out_h = n;
    p->out = (int8_t *)a->pw.out + (size_t)y * dw->out_w * a->pw.out_c * (a->pw.rq ? 1 : 4);
}

void pnn_dw_pw(const tsr_dw_pw_args_t *a, int core, int ncores)
{
    const tsr_conv_args_t *dw = &a->dw;
    const int32_t C = dw->out_c, Wo = dw->out_w, Co = a->pw.out_c;
    const int32_t fd = a->fd > 0 ? a->fd : 1;
    const size_t in_row = (size_t)dw->in_w * dw->in_c;
    int8_t *buf = a->buf + (size_t)core * fd * Wo * C;
    int32_t r0, r1, y, n;
    tsr_conv_args_t d = *dw, p = a->pw;

    pnn_chunk(dw->out_h, 1, core, ncores, &r0, &r1);
    d.out = buf;
    d.scratch = dw->scratch ? dw->scratch + (size_t)core * dw->scratch_bytes : 0;
    p.in = buf;
    p.in_w = Wo;
    p.in_c = C;
    p.out_w = Wo;
    for (y = r0; y < r1; y += n) {
        /* the block's padded input rows [v0, v1], the part inside the band's tile */
        int32_t v0, v1, i0, i1;
        n = r1 - y < fd ? r1 - y : fd;
        v0 = y * dw->sh - dw->pad_t;
        v1 = (y + n - 1) * dw->sh - dw->pad_t + dw->kh - 1;
        i0 = v0 > 0 ? v0 : 0;
        i1 = v1 < dw->in_h - 1 ? v1 : dw->in_h - 1;
        d.in = dw->in + (size_t)i0 * in_row;
        d.in_h = i1 - i0 + 1;
        d.pad_t = i0 - v0;
        d.pad_b = v1 - i1;
        d.out_h = n;
        pnn_depthwise(&d, 0, 1);
        p.in_h = n;
        p.out_h = n;
        p.out = (int8_t *)a->pw.out + (size_t)y * Wo * Co * (a->pw.rq ? 1 : 4);
        pnn_pointwise(&p, 0, 1);
    }
}
