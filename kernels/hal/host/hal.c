/*
 * HAL of the host target: DMA is a copy (counted per engine), the compute
 * cores run one after the other, and nothing is timed (host runs check
 * correctness; counts come from QEMU or GVSoC).
 */
#include <string.h>

#include "tessera/hal.h"

#ifndef TSR_NCORES
#define TSR_NCORES 1
#endif

uint64_t hal_dma_bytes[HAL_MAX_DMA];
static int current_core;

#ifdef TSR_STORAGE_WINDOW
/* storage.c: a strided copy of which one side is on the card */
void hal_storage_dma(void *dst, const void *src, uint32_t bytes, uint32_t rows, uint32_t src_stride,
                     uint32_t dst_stride, uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride);
#endif

void hal_init(void)
{
}

void hal_fork(void (*fn)(void *), void *arg)
{
    /* in turn: a core that writes outside its share overwrites another's
     * result and the check step sees it */
    for (current_core = 0; current_core < TSR_NCORES; current_core++)
        fn(arg);
    current_core = 0;
}

int hal_core_id(void)
{
    return current_core;
}

int hal_num_cores(void)
{
    return TSR_NCORES;
}

void hal_barrier(void)
{
    /* cores run in turn: there is no one to wait for */
}

void hal_dma_start(hal_dma_job_t *job, int engine, void *dst, const void *src,
                   uint32_t bytes, uint32_t rows, uint32_t src_stride, uint32_t dst_stride,
                   uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride)
{
    uint32_t p, r;
#ifdef TSR_STORAGE_WINDOW
    if (HAL_IN_STORAGE(src) || HAL_IN_STORAGE(dst)) {
        hal_storage_dma(dst, src, bytes, rows, src_stride, dst_stride, planes, src_plane_stride,
                        dst_plane_stride);
        hal_dma_bytes[engine] += (uint64_t)bytes * rows * planes;
        job->pending = 0;
        return;
    }
#endif
    for (p = 0; p < planes; p++)
        for (r = 0; r < rows; r++)
            memcpy((char *)dst + p * dst_plane_stride + r * dst_stride,
                   (const char *)src + p * src_plane_stride + r * src_stride, bytes);
    hal_dma_bytes[engine] += (uint64_t)bytes * rows * planes;
    job->pending = 0;
}

void hal_dma_wait(hal_dma_job_t *job)
{
    (void)job;
}

uint64_t hal_counter(void)
{
    return 0;
}
