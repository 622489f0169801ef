/*
 * A patched step (site_scons/tessera/tiles/patches.py, codegen/patched.py):
 * a chain of layers run patch by patch over buffers in the tile level. The
 * generated step walks a table of ops fixed at build time:
 *
 *   TSR_PATCH_SHIFT  move aux bytes from src down to dst (the rows a buffer
 *                    keeps for the next patch, to its top)
 *   TSR_PATCH_LOAD   copy rows [ih, ih + h) x columns [iw, iw + w) of the
 *                    chain's input into dst
 *   TSR_PATCH_CALL   layer `layer` from src (ih x iw) to dst (h x w), with
 *                    this call's padding
 *   TSR_PATCH_ADD    layer `layer`, an add, on h rows of w elements: a at
 *                    src, b at aux, the sum at dst, rows ih, iw and w bytes
 *                    apart
 *   TSR_PATCH_STORE  copy output buffer `buf` (h x w) to rows [ih, ih + h) x
 *                    columns [iw, iw + w) of the chain's output
 *
 * Offsets are from the tile level's start. The generated step declares the
 * table's row type, tsr_patch_op_t with TSR_PATCH_OFFSET its offsets' type
 * (16 bits where the tile level allows: the table lives in flash).
 */
#ifndef TESSERA_PATCH_H
#define TESSERA_PATCH_H

#include <stdint.h>
#include <string.h>

enum { TSR_PATCH_SHIFT = 0, TSR_PATCH_LOAD = 1, TSR_PATCH_CALL = 2, TSR_PATCH_ADD = 3, TSR_PATCH_STORE = 4 };

#ifndef TSR_PATCH_OFFSET
#define TSR_PATCH_OFFSET int32_t
#endif

typedef struct {
    TSR_PATCH_OFFSET src, dst, aux;
    int16_t h, w, ih, iw;
    int8_t pad_t, pad_l, pad_b, pad_r;
    uint8_t op, layer, buf;
} tsr_patch_op_t;

/* dst < src, overlapping: words while both are aligned, then bytes (the
 * C library's memmove is a byte loop behind a call on picolibc) */
static inline void tsr_patch_move(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t i = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 3u) == 0) {
        for (; i + 4 <= n; i += 4) {
            uint32_t v;
            memcpy(&v, src + i, 4);
            memcpy(dst + i, &v, 4);
        }
    }
    for (; i < n; i++)
        dst[i] = src[i];
}

#endif /* TESSERA_PATCH_H */
