/*
 * Types shared by every generated network: its layer table and the trace
 * hook a test harness (or a profiler in your firmware) can pass to
 * <network>_run_traced().
 */
#ifndef TESSERA_RUNTIME_H
#define TESSERA_RUNTIME_H

#include <stdint.h>

typedef struct {
    const char *name;          /* the layer's name in the IR */
    void (*run)(void);         /* the generated layer function */
    const int8_t *output;      /* its output tensor (stored as int8, or int32 accumulators) */
    uint32_t output_bytes;
} tsr_layer_info_t;

/* Called before (end = 0) and after (end = 1) each layer. */
typedef void (*tsr_trace_fn)(int layer, int end);

#endif /* TESSERA_RUNTIME_H */
