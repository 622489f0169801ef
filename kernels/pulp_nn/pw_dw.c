/*
 * pointwise -> depthwise fused channel-wise (API: tsr_pw_dw in kernels.h) on
 * this library's own kernels, the shared scheme the generated steps run:
 * per block of n <= fd output channels, all cores together run
 * pnn_pointwise for those channels over the band's whole input map into one
 * L1 buffer ([in_h][in_w][n], HWC like every tile here: the 4x2 matmul
 * stores a pixel's channels side by side, and the depthwise gathers its
 * stripes out of an HWC tile anyway), a fork boundary, then
 * pnn_depthwise_block over the same n channels, written into the band's
 * output at its channel offset. Each half is split over the cores as the
 * layer alone (pixels, then channels), so with fd the whole channel count a
 * block is exactly the two layers' tiles with the intermediate kept in L1.
 *
 * A block is the two layers restricted to channels [c, c + n): their
 * weights, biases and per-channel requantization start at channel c (the
 * requantization records are copied with shifted arrays into rq[2]).
 */
#include "pnn_common.h"
#include "tessera/pulp_nn.h"
#include "tessera/pw_dw_rows.h"

/* a pair of the blocks' requantization records, beside pnn_dw_pw_parts
 * (the generated steps keep theirs on the step's stack: L1 on PULP-open) */
tsr_requant_t pnn_pw_dw_rq[2];

static const tsr_requant_t *from_channel(const tsr_requant_t *rq, int32_t c, tsr_requant_t *dst)
{
    if (!rq || !rq->per_channel)
        return rq;
    *dst = *rq;
    dst->mul = rq->mul + c;
    dst->shift = rq->shift + c;
    if (rq->add)
        dst->add = rq->add + c;
    return dst;
}

void pnn_pw_dw_block(const tsr_pw_dw_args_t *a, int32_t c, int32_t n, tsr_conv_args_t *p, tsr_conv_args_t *d,
                     tsr_requant_t rq[2])
{
    const tsr_conv_args_t *pw = &a->pw, *dw = &a->dw;
    *p = *pw;
    p->weights = pw->weights + (size_t)c * pw->in_c;
    p->bias = pw->bias ? pw->bias + c : 0;
    p->rq = from_channel(pw->rq, c, &rq[0]);
    p->out = a->buf;
    p->out_h = pw->in_h;
    p->out_w = pw->in_w;
    p->out_c = n;
    *d = *dw;
    d->in = a->buf;
    d->in_h = pw->in_h;
    d->in_w = pw->in_w;
    d->in_c = n;
    d->weights = dw->weights + (size_t)c * dw->kh * dw->kw;
    d->bias = dw->bias ? dw->bias + c : 0;
    d->rq = from_channel(dw->rq, c, &rq[1]);
    d->out = (int8_t *)dw->out + c;     /* out_c stays the band's: the pixel stride */
}

/* Row-wise with the shifted buffer (tessera/pw_dw_rows.h), the shared
 * scheme: per block of n output rows of the band (y a multiple of a->fd),
 * the kept rows shifted up here (by the caller's core, before the forks),
 * p: pnn_pointwise of the new rows (pixels split), d: pnn_depthwise of the
 * block (channels split) into its rows of the band's output. */
void pnn_pw_dw_rows_block(const tsr_pw_dw_args_t *a, int32_t y, int32_t n, tsr_conv_args_t *p, tsr_conv_args_t *d)
{
    tsr_pw_dw_rows_plan(a, y, n, y == 0, p, d);
}
