/* The Cortex-M kernels' cores (mm.c: convolution, pointwise, fully
 * connected; dw.c: depthwise), one template for every requantization form
 * (tsr_rq.h): CMSIS-NN's API (arm/) and tessera's own entry points (glue.c,
 * any_rq.c) call them with their form. Private to the library's sources. */
#ifndef TSR_MM_H
#define TSR_MM_H

#include <stdint.h>

#include "tsr_rq.h"

/* A matrix product's constant side: filter rows [co][k], bias, requantization. */
typedef struct {
    const int8_t *w;
    const int32_t *bias;        /* [co] or NULL */
    int32_t k, co;
    tsr_rqp_t q;
    int32_t dbl;                /* 1: the accumulators are doubled (TSR_RQ_TFL; the cores set it) */
} tsr_mm_t;

/* A convolution's geometry (HWC input and output, one image). */
typedef struct {
    const int8_t *in;
    int32_t in_h, in_w, in_c;
    int32_t kh, kw, sh, sw, pt, pl;
    int32_t in_off;
    int8_t *out;
    int32_t out_h, out_w;
} tsr_geom_t;

/* bytes of P interleaved k-element int16 columns */
static inline int32_t tsr_cols_bytes(int32_t k, int32_t P)
{
    return P * ((k + 3) & ~3) * (int32_t)sizeof(int16_t);
}

/* Convolution by im2col into buf (buf_bytes: four columns when they fit,
 * else two; at least two): 0 when buf is too small. */
int tsr_mm_conv(const tsr_mm_t *m, const tsr_geom_t *g, int32_t *buf, int32_t buf_bytes, int mode);
/* Pointwise over `pixels` pixels of k channels (the same columns). */
int tsr_mm_pointwise(const tsr_mm_t *m, const int8_t *in, int32_t pixels, int32_t in_off, int8_t *out, int32_t *buf,
                     int32_t buf_bytes, int mode);
/* Fully connected: one vector of k values; buf (tsr_cols_bytes(k, 1), or
 * NULL: a slower path) holds it as an int16 column. */
void tsr_mm_fc(const tsr_mm_t *m, const int8_t *x, int32_t in_off, int8_t *out, int32_t *buf, int32_t buf_bytes,
               int mode);

/* Fully connected, CMSIS-NN's per-channel half up with a bias into int8's
 * own range (its hot case on its own, no tsr_mm_t to fill): 0 (nothing
 * done) unless k is a multiple of 8, w and col word-aligned and col_bytes
 * at least 2k. */
typedef struct {
    const int8_t *w;
    const int32_t *bias, *mul, *shift;  /* [co]; shift: CMSIS-NN's left shifts */
    int32_t k, co, zp;
} tsr_fc_hu_t;

int tsr_fc_hu(const tsr_fc_hu_t *f, const int8_t *x, int32_t off, int8_t *out, int32_t *col, int32_t col_bytes);

/* Depthwise (channel multiplier 1): filter [kh][kw][c] (CMSIS-NN's order),
 * wx: room for its sign-extended copy (2 * kh * kw * c bytes, 4-aligned) or
 * NULL (then TSR_RQ_TFL runs as TSR_RQ_ANY); room: the bytes at wx (a 3x3
 * filter runs on 16-bit planes in what lies past the copy: dw.c); the core
 * sets dbl. */
typedef struct {
    tsr_geom_t g;
    int32_t c;
    const int8_t *w;
    int32_t *wx;
    int32_t room;
    const int32_t *bias;
    tsr_rqp_t q;
} tsr_dwk_t;

void tsr_dw(const tsr_dwk_t *d, int mode);

#endif /* TSR_MM_H */
