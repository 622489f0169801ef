/*
 * Rebuild tile i of a layer's tile grid (tessera/tile.h). Not a kernel: the
 * generated layer loops call it once or twice per tile. It lives here
 * because every kernel library compiles the reference files in (its
 * fallback), so each firmware links one copy instead of one per layer.
 */
#include "tessera/tile.h"

void tsr_tile_at(tsr_tile_t *t, const tsr_grid_t *g, int i)
{
    int per_c = g->nrows * g->ncols;
    int ci, ri, wi = i % g->ncols;
    const tsr_chans_t *c;
    const tsr_span_t *r, *w = &g->cols[wi];
    if (g->rows_first) {                 /* row band, channel tile, column band */
        ri = i / (g->nchans * g->ncols);
        ci = (i / g->ncols) % g->nchans;
    } else {                             /* channel tile, row band, column band */
        ci = i / per_c;
        ri = (i % per_c) / g->ncols;
    }
    c = &g->chans[ci];
    r = &g->rows[ri];
    t->oh0 = r->o0; t->oh = r->o; t->ih0 = r->i0; t->ih = r->i;
    t->ow0 = w->o0; t->ow = w->o; t->iw0 = w->i0; t->iw = w->i;
    t->oc0 = c->oc0; t->oc = c->oc; t->ic0 = c->ic0; t->ic = c->ic;
    t->pad_t = r->pad0; t->pad_b = r->pad1; t->pad_l = w->pad0; t->pad_r = w->pad1;
    /* weights change with the channel tile: at its first column band */
    t->new_weights = wi == 0 && (i == 0 || (g->rows_first ? g->nchans > 1 : ri == 0));
}
