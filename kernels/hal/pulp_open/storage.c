/*
 * The storage driver of pulp_open: the board's HyperFlash (uDMA hyperbus,
 * chip select 1) holds the storage level's bytes. The build writes them
 * (storage.bin) and the GVSoC runner preloads the flash with them, so the
 * `storage=<path>` argument names nothing the firmware opens. The DMA's
 * reads are queued on the uDMA and run while the cores compute (the job's
 * hal_dma_wait waits for them); hal_storage_read waits at once. Writes would need the
 * flash's program commands, which this driver does not issue: a plan that
 * swaps activations out stops with the reason.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pulp_open.h"
#include "tessera/hal.h"

#ifdef TSR_STORAGE_WINDOW   /* only targets with a storage level have L3 */

HAL_L1 uint64_t hal_storage_bytes[2];
HAL_L1 uint32_t hal_storage_ops[2];

int hal_storage_open(const char *path)
{
    (void)path;   /* the flash is preloaded by the runner */
    return 0;
}

int hal_storage_read(void *dst, uint32_t offset, uint32_t bytes)
{
    if (bytes)
        po_hyper_read(PO_HYPER_CS_FLASH, dst, offset, bytes);
    return 0;
}

int hal_storage_write(uint32_t offset, const void *src, uint32_t bytes)
{
    (void)offset, (void)src, (void)bytes;
    return -1;
}

/* the out-of-core program's request queue (tessera/program.h): reads wait
 * at issue, as hal_storage_read does; writes fail as above */
static uint32_t issued;

void hal_storage_reset_queue(void)
{
    issued = 0;
}

uint32_t hal_storage_issue(int write, uint32_t offset, void *sram, uint32_t bytes)
{
    if (write || hal_storage_read(sram, offset, bytes) != 0) {
        printf("tessera storage: a write to the HyperFlash at offset %lu (the driver only reads it)\n",
               (unsigned long)offset);
        exit(3);
    }
    hal_storage_bytes[0] += bytes;
    hal_storage_ops[0]++;
    return issued++;
}

void hal_storage_wait_for(uint32_t n)
{
    (void)n;    /* done at issue */
}

/* A piece of a weight chunk, from the flash into L2 (tile.h's
 * tsr_wstream_load, at a layer's first tile): queued on the uDMA at once,
 * not through hal_dma_run's general path (about 300 cycles of cold code a
 * piece); anything else goes that way. Here, not in hal.c: the DMA code
 * there keeps its place in the instruction caches. */
void hal_dma_chunk(hal_dma_job_t *job, int engine, void *dst, const void *src, uint32_t bytes)
{
    if (!bytes || !HAL_IN_STORAGE(src) || HAL_IN_STORAGE(dst)) {
        hal_dma_run(job, engine, dst, src, bytes);
        return;
    }
    hal_dma_bytes[engine] += bytes;
    po_hyper_start_read(PO_HYPER_CS_FLASH, dst, HAL_STORAGE_OFFSET(src), bytes);
    hal_storage_bytes[0] += bytes;
    hal_storage_ops[0]++;
    job->pending |= PO_JOB_HYPER;
}

void hal_storage_dma(void *dst, const void *src, uint32_t bytes, uint32_t rows, uint32_t src_stride,
                     uint32_t dst_stride, uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride)
{
    uint32_t p, r;
    if (!HAL_IN_STORAGE(src) || HAL_IN_STORAGE(dst)) {
        printf("tessera storage: a write to the HyperFlash at offset %lu (the driver only reads it)\n",
               (unsigned long)HAL_STORAGE_OFFSET(dst));
        exit(3);
    }
    if (rows > 1 && src_stride == bytes && dst_stride == bytes) {
        bytes *= rows;
        rows = 1;
    }
    for (p = 0; p < planes; p++)
        for (r = 0; r < rows; r++) {
            uint8_t *d = (uint8_t *)dst + p * dst_plane_stride + r * dst_stride;
            const uint8_t *s = (const uint8_t *)src + p * src_plane_stride + r * src_stride;
            po_hyper_start_read(PO_HYPER_CS_FLASH, d, HAL_STORAGE_OFFSET(s), bytes);
            hal_storage_bytes[0] += bytes;
            hal_storage_ops[0]++;
        }
}

#endif /* TSR_STORAGE_WINDOW */
