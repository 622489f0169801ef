/*
 * Runs of int8 values copied or mapped through a 256-entry table, a word at
 * a time (ARMv7-M's ldr and str take any alignment): concatenation,
 * resize and the table activations share them.
 */
#ifndef TSR_BYTES_H
#define TSR_BYTES_H

#include "tsr_dsp.h"

/* y[0..n) = x[0..n), eight bytes a turn (not picolibc's byte loop behind memcpy) */
TSR_INLINE void tsr_copy_run(int8_t *y, const int8_t *x, int32_t n)
{
    for (; n >= 8; n -= 8, x += 8, y += 8) {
        const uint32_t lo = tsr_ld32(x), hi = tsr_ld32(x + 4);
        tsr_st32(y, lo);
        tsr_st32(y + 4, hi);
    }
    for (; n > 0; n--)
        *y++ = *x++;
}

/* y[i] = t[x[i]] with t pointing at the entry of 0 (the table's 129th byte) */
TSR_INLINE void tsr_map_run(int8_t *y, const int8_t *x, int32_t n, const uint8_t *t)
{
    for (; n >= 4; n -= 4, x += 4, y += 4) {
        const uint32_t w = tsr_ld32(x);
        tsr_st32(y, (uint32_t)t[(int8_t)w] | (uint32_t)t[(int8_t)(w >> 8)] << 8
                    | (uint32_t)t[(int8_t)(w >> 16)] << 16 | (uint32_t)t[(int8_t)(w >> 24)] << 24);
    }
    for (; n > 0; n--)
        *y++ = (int8_t)t[*x++];
}

#endif /* TSR_BYTES_H */
