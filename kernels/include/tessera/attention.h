/*
 * Row functions of attention's row-wise ops (kernels/reference/attention.c),
 * shared by every kernel library: one row of c values at a time, so a
 * library's own kernel only decides which core takes which rows.
 */
#ifndef TESSERA_ATTENTION_H
#define TESSERA_ATTENTION_H

#include <stdint.h>

#include "tessera/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deeploy's softmax modes (a->mode != TSR_SOFTMAX_TABLE) of one row of a->c values */
void tsr_softmax_deeploy_row(const tsr_softmax_args_t *a, const int8_t *x, int8_t *y);
/* layer normalization of one row of a->c values */
void tsr_layernorm_row(const tsr_layernorm_args_t *a, const int8_t *x, int8_t *y);
/* floor(sqrt(v)) */
uint64_t tsr_isqrt64(uint64_t v);

#ifdef __cplusplus
}
#endif

#endif
