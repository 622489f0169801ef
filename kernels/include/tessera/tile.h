/*
 * Helpers the generated layer code uses to move tiles of HWC tensors with
 * the HAL's DMA. A tile is one row of the layer's tile table: output ranges
 * (start, size) per axis, the input ranges it reads, and its padding.
 */
#ifndef TESSERA_TILE_H
#define TESSERA_TILE_H

#include <stdint.h>

#include "tessera/hal.h"

typedef struct {
    int16_t oh0, oh, ow0, ow, oc0, oc;   /* output rows, cols, channels */
    int16_t ih0, ih, iw0, iw, ic0, ic;   /* input rows, cols, channels read */
    int8_t pad_t, pad_l, pad_b, pad_r;   /* this tile's padding */
    int8_t new_weights;                  /* first tile of a channel tile */
} __attribute__((aligned(4))) tsr_tile_t;   /* a copy is a few word moves */

/* A layer's tiles are a grid (tiler/geometry.py): channel tiles outermost,
 * then row bands, then column bands (or row bands first). The generated code keeps one entry per
 * band of each axis, not one row per tile (a table per tile took half of
 * GAP8's L2 code reservation on mbv1_224) and rebuilds tile i from them. */
typedef struct {
    int16_t o0, o, i0, i;                /* output start and size, input start and size */
    int8_t pad0, pad1;                   /* padding before and after */
} tsr_span_t;

typedef struct {
    int16_t oc0, oc, ic0, ic;            /* output and input channels */
} tsr_chans_t;

typedef struct {
    const tsr_span_t *rows, *cols;
    const tsr_chans_t *chans;
    int nrows, ncols;
    int nchans, rows_first;              /* rows_first: row bands outermost (a storage-level tile) */
} tsr_grid_t;

/* Tile i of grid g (kernels/reference/tile.c: one copy for every layer). */
void tsr_tile_at(tsr_tile_t *t, const tsr_grid_t *g, int i);

/* A 1D copy and a 2D one (rows of `bytes`, strided on each side): the
 * HAL's short entries where it has them (TSR_HAL_DMA_RUNS), else the same
 * hal_dma_start call as ever (macros: other platforms compile the very
 * code they compiled before the short entries). */
#ifdef TSR_HAL_DMA_RUNS
#define tsr_dma_run(job, engine, dst, src, bytes) hal_dma_run(job, engine, dst, src, bytes)
#define tsr_dma_rows(job, engine, dst, src, bytes, rows, src_stride, dst_stride) \
    hal_dma_rows(job, engine, dst, src, bytes, rows, src_stride, dst_stride)
#else
#define tsr_dma_run(job, engine, dst, src, bytes) hal_dma_start(job, engine, dst, src, bytes, 1, 0, 0, 1, 0, 0)
#define tsr_dma_rows(job, engine, dst, src, bytes, rows, src_stride, dst_stride) \
    hal_dma_start(job, engine, dst, src, bytes, rows, src_stride, dst_stride, 1, 0, 0)
#endif

/* Copy a box of an HWC tensor [.][w][c] (element size esize) between the
 * tensor and a compact tile buffer [h][w][c]. to_tile: tensor -> tile. */
static inline void tsr_dma_box(hal_dma_job_t *job, int engine, int8_t *tile, int8_t *tensor,
                               int32_t w, int32_t c, int32_t esize,
                               int32_t h0, int32_t h, int32_t w0, int32_t tw, int32_t c0, int32_t tc,
                               int to_tile)
{
    int8_t *t_start = tensor + ((h0 * w + w0) * c + c0) * esize;
    uint32_t row = (uint32_t)(w * c * esize);       /* one tensor row */
    uint32_t pix = (uint32_t)(c * esize);           /* one tensor pixel */
    uint32_t bytes = (uint32_t)(tc * esize);
    int8_t *dst, *src;
    uint32_t ds, ss, dps, sps;
    if (tc == c && tw == w) {                       /* whole rows: one run */
        bytes *= (uint32_t)(tw * h);
        dst = to_tile ? tile : t_start;
        src = to_tile ? t_start : tile;
        tsr_dma_run(job, engine, dst, src, bytes);
        return;
    }
    if (tc == c) {                                  /* full pixels: 2D, rows of tw pixels */
        bytes *= (uint32_t)tw;
        dst = to_tile ? tile : t_start;
        src = to_tile ? t_start : tile;
        ds = to_tile ? bytes : row;
        ss = to_tile ? row : bytes;
        tsr_dma_rows(job, engine, dst, src, bytes, (uint32_t)h, ss, ds);
        return;
    }
    /* channel slice: 3D, tc-element pieces of tw pixels of h rows */
    dst = to_tile ? tile : t_start;
    src = to_tile ? t_start : tile;
    ds = to_tile ? bytes : pix;
    ss = to_tile ? pix : bytes;
#ifdef TSR_HAL_DMA_RUNS
    if (tw == w) {
        /* whole rows of pixels: the rows continue each other in the tensor,
         * so the pieces are one 2D copy of h * tw pieces (the command the
         * HAL folds the 3D copy into, without its general path's cold code:
         * about 600-900 cycles of core 0 a tile on PULP-open) */
        tsr_dma_rows(job, engine, dst, src, bytes, (uint32_t)(h * tw), ss, ds);
        return;
    }
#endif
    dps = to_tile ? bytes * (uint32_t)tw : row;
    sps = to_tile ? row : bytes * (uint32_t)tw;
    hal_dma_start(job, engine, dst, src, bytes, (uint32_t)tw, ss, ds, (uint32_t)h, sps, dps);
}

/* The input box a tile reads, into its L1 buffer. */
static inline void tsr_tile_in(hal_dma_job_t *job, int engine, int8_t *l1, const int8_t *tensor,
                               int32_t w, int32_t c, int32_t esize, const tsr_tile_t *t)
{
    tsr_dma_box(job, engine, l1, (int8_t *)tensor, w, c, esize, t->ih0, t->ih, t->iw0, t->iw,
                t->ic0, t->ic, 1);
}

/* A computed output tile, from its L1 buffer back into the tensor. */
static inline void tsr_tile_out(hal_dma_job_t *job, int engine, int8_t *tensor, const int8_t *l1,
                                int32_t w, int32_t c, int32_t esize, const tsr_tile_t *t)
{
    tsr_dma_box(job, engine, (int8_t *)l1, tensor, w, c, esize, t->oh0, t->oh, t->ow0, t->ow,
                t->oc0, t->oc, 0);
}

/* The same for a channel-major tensor [.][H][W] (a pulp_nn pointwise's
 * output whose only reader is a depthwise: docs/gvsoc.md, "channel-major
 * input") and a tile buffer [c][h][w]: whole planes are one run, whole rows
 * one run per channel (2D), else rows of each channel (3D). */
static inline void tsr_dma_box_chw(hal_dma_job_t *job, int engine, int8_t *tile, int8_t *tensor, int32_t H,
                                   int32_t W, int32_t h0, int32_t h, int32_t w0, int32_t w, int32_t c0,
                                   int32_t c, int to_tile)
{
    int8_t *ts = tensor + ((c0 * H + h0) * W + w0);
    int8_t *dst = to_tile ? tile : ts, *src = to_tile ? ts : tile;
    const uint32_t run = (uint32_t)(h * w), plane = (uint32_t)(H * W);
    if (w == W && h == H) {
        tsr_dma_run(job, engine, dst, src, run * (uint32_t)c);
        return;
    }
    if (w == W) {
        tsr_dma_rows(job, engine, dst, src, run, (uint32_t)c, to_tile ? plane : run, to_tile ? run : plane);
        return;
    }
    hal_dma_start(job, engine, dst, src, (uint32_t)w, (uint32_t)h, (uint32_t)(to_tile ? W : w),
                  (uint32_t)(to_tile ? w : W), (uint32_t)c, to_tile ? plane : run, to_tile ? run : plane);
}

static inline void tsr_tile_in_chw(hal_dma_job_t *job, int engine, int8_t *l1, const int8_t *tensor, int32_t H,
                                   int32_t W, const tsr_tile_t *t)
{
    tsr_dma_box_chw(job, engine, l1, (int8_t *)tensor, H, W, t->ih0, t->ih, t->iw0, t->iw, t->ic0, t->ic, 1);
}

static inline void tsr_tile_out_chw(hal_dma_job_t *job, int engine, int8_t *tensor, const int8_t *l1, int32_t H,
                                    int32_t W, const tsr_tile_t *t)
{
    tsr_dma_box_chw(job, engine, (int8_t *)l1, tensor, H, W, t->oh0, t->oh, t->ow0, t->ow, t->oc0, t->oc, 0);
}

/* Rows [first, first + n) of a [rows][row_bytes] array (weights and
 * per-channel parameters of a channel tile): one contiguous run. */
static inline void tsr_rows_in(hal_dma_job_t *job, int engine, int8_t *l1, const void *array,
                               int32_t row_bytes, int32_t first, int32_t n)
{
    tsr_dma_run(job, engine, l1, (const int8_t *)array + first * row_bytes, (uint32_t)(n * row_bytes));
}

/* ---- weights streamed through a staging level -------------------------- *
 * Where the tile level cannot reach the weight level (GAP8: L3 -> L2 by the
 * I/O DMA, L2 -> L1 by the cluster DMA), every layer's weights and
 * parameters flow, in network order and in chunks of whole channel tiles,
 * through the staging level: while the tiles of chunk k are copied from its
 * buffer, chunk k + 1 (perhaps the next layer's) lands in its own. The
 * memory plan fixed every chunk's place; the generated network.c holds the
 * table, and layers take their chunks with tsr_wstream_next. */
typedef struct {
    const void *src;        /* in the weight level */
    int8_t *dst;            /* in the staging level; a chunk's first piece starts its buffer */
    uint32_t bytes;
} tsr_wpiece_t;

typedef struct {
    const tsr_wpiece_t *pieces;
    const uint16_t *first;  /* chunk k is pieces[first[k] .. first[k + 1]) */
    uint32_t chunks;
    int engine;
    uint32_t next;          /* the chunk the next call hands out; 0 starts a run */
    hal_dma_job_t job[2];   /* chunk k loads on job[k % 2] */
} tsr_wstream_t;

static inline void tsr_wstream_load(tsr_wstream_t *s, uint32_t k)
{
    uint32_t p;
    for (p = s->first[k]; p < s->first[k + 1]; p++)
#if defined(TSR_HAL_DMA_RUNS) && defined(TSR_STORAGE_WINDOW)
        hal_dma_chunk(&s->job[k & 1], s->engine, s->pieces[p].dst, s->pieces[p].src, s->pieces[p].bytes);
#else
        tsr_dma_run(&s->job[k & 1], s->engine, s->pieces[p].dst, s->pieces[p].src, s->pieces[p].bytes);
#endif
}

/* The next chunk's buffer, once the chunk has landed; starts loading the one
 * after it (whose place the chunk before this one, fully copied to the
 * tiles by now, may have used). The first call of a run loads chunk 0. */
static inline const int8_t *tsr_wstream_next(tsr_wstream_t *s)
{
    uint32_t k = s->next++;
    if (k == 0)
        tsr_wstream_load(s, 0);
    hal_dma_wait(&s->job[k & 1]);
    if (k + 1 < s->chunks)
        tsr_wstream_load(s, k + 1);
    return s->pieces[s->first[k]].dst;
}

#endif /* TESSERA_TILE_H */
