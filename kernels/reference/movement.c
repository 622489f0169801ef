/*
 * Reference kernels of the data-movement ops (see kernels.h): transpose and
 * gather of an int8 block in L1. Each core takes a contiguous share of the
 * output's rows (a transpose's rows of its innermost axis); nothing is
 * computed, values are only moved.
 */
#include "ref_common.h"

void tsr_transpose(const tsr_transpose_args_t *a, int core, int ncores)
{
    const int32_t dims[3] = {a->in_h, a->in_w, a->in_c};
    const size_t stride[3] = {(size_t)a->in_w * (size_t)a->in_c, (size_t)a->in_c, 1};
    const int32_t d1 = dims[a->perm[1]], d2 = dims[a->perm[2]];
    const size_t s0 = stride[a->perm[0]], s1 = stride[a->perm[1]], s2 = stride[a->perm[2]];
    int32_t r0, r1, r, k, i0, i1;
    /* the output's rows of d2 values (axes 0 and 1 together), a share each:
     * a [1, T, K] -> [1, K, T] transpose has one row on axis 0 */
    tsr_ref_share(dims[a->perm[0]] * d1, core, ncores, &r0, &r1);
    if (r0 >= r1)
        return;
    i0 = r0 / d1, i1 = r0 % d1;     /* the first row's index on axes 0 and 1, then counted up */
    for (r = r0; r < r1; r++) {
        int8_t *o = a->out + (size_t)r * (size_t)d2;
        const int8_t *x = a->in + (size_t)i0 * s0 + (size_t)i1 * s1;
        if (s2 == 1) {      /* the innermost axis stays innermost: a run */
            for (k = 0; k < d2; k++)
                o[k] = x[k];
        } else {
            for (k = 0; k < d2; k++, x += s2)
                o[k] = *x;
        }
        if (++i1 == d1)
            i1 = 0, i0++;
    }
}

void tsr_gather(const tsr_gather_args_t *a, int core, int ncores)
{
    const int32_t h = a->axis == 0 ? a->n_index : a->in_h;
    const int32_t w = a->axis == 1 ? a->n_index : a->in_w;
    const int32_t c = a->axis == 2 ? a->n_index : a->in_c;
    int32_t r0, r1, y, x, k;
    tsr_ref_share(h, core, ncores, &r0, &r1);
    for (y = r0; y < r1; y++) {
        const int32_t iy = a->axis == 0 ? a->index[y] : y;
        for (x = 0; x < w; x++) {
            const int32_t ix = a->axis == 1 ? a->index[x] : x;
            int8_t *o = a->out + ((size_t)y * w + x) * c;
            if (iy < 0 || ix < 0) {             /* a padded row or column */
                for (k = 0; k < c; k++)
                    o[k] = (int8_t)a->fill;
                continue;
            }
            const int8_t *in = a->in + ((size_t)iy * a->in_w + ix) * a->in_c;
            if (a->axis == 2) {
                for (k = 0; k < c; k++)
                    o[k] = a->index[k] < 0 ? (int8_t)a->fill : in[a->index[k]];
            } else {
                for (k = 0; k < c; k++)
                    o[k] = in[k];
            }
        }
    }
}

void tsr_argmax(const tsr_argmax_args_t *a, int core, int ncores)
{
    int32_t p0, p1, p, k;
    tsr_ref_share(a->pixels, core, ncores, &p0, &p1);
    for (p = p0; p < p1; p++) {
        const int8_t *x = a->in + (size_t)p * a->c;
        int32_t best = 0;
        for (k = 1; k < a->c; k++)
            if (x[k] > x[best])
                best = k;
        a->out[p] = best;
    }
}
