/*
 * The storage driver of the host target: the card is a file on the build
 * machine, read and written with stdio (the runner passes a scratch copy of
 * the build's storage.bin as `storage=<path>`), so out-of-core builds run
 * natively too. Same interface as kernels/hal/cortexm/storage.c: blocking
 * transfers, a request queue that completes each request at issue, and the
 * strided copies of hal_dma_start with one side in the storage window.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tessera/hal.h"

#ifdef TSR_STORAGE_WINDOW   /* only targets with a storage level have a card */

uint64_t hal_storage_bytes[2];
uint32_t hal_storage_ops[2];
static FILE *card;
static uint32_t issued;

int hal_storage_open(const char *path)
{
    card = fopen(path, "r+b");
    return card ? 0 : -1;
}

static void fail(const char *what, uint32_t offset)
{
    fprintf(stderr, "tessera storage: %s at offset %lu failed (no card: run with storage=<image>)\n", what,
            (unsigned long)offset);
    exit(3);
}

int hal_storage_read(void *dst, uint32_t offset, uint32_t bytes)
{
    if (!card || fseek(card, (long)offset, SEEK_SET) != 0)
        return -1;
    return fread(dst, 1, bytes, card) == bytes ? 0 : -1;
}

int hal_storage_write(uint32_t offset, const void *src, uint32_t bytes)
{
    if (!card || fseek(card, (long)offset, SEEK_SET) != 0)
        return -1;
    return fwrite(src, 1, bytes, card) == bytes ? 0 : -1;
}

void hal_storage_reset_queue(void)
{
    issued = 0;
}

uint32_t hal_storage_issue(int write, uint32_t offset, void *sram, uint32_t bytes)
{
    if (write ? hal_storage_write(offset, sram, bytes) != 0 : hal_storage_read(sram, offset, bytes) != 0)
        fail(write ? "write" : "read", offset);
    hal_storage_bytes[write != 0] += bytes;
    hal_storage_ops[write != 0]++;
    return issued++;            /* done at issue */
}

void hal_storage_wait_for(uint32_t n)
{
    if (n >= issued) {
        fprintf(stderr, "tessera storage: wait for request %lu, only %lu issued\n", (unsigned long)n,
                (unsigned long)issued);
        exit(3);
    }
}

void hal_storage_dma(void *dst, const void *src, uint32_t bytes, uint32_t rows, uint32_t src_stride,
                     uint32_t dst_stride, uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride)
{
    int reading = HAL_IN_STORAGE(src);
    uint32_t p, r;
    /* rows that follow each other on the card and in SRAM are one transfer */
    if (rows > 1 && src_stride == bytes && dst_stride == bytes) {
        bytes *= rows;
        rows = 1;
    }
    for (p = 0; p < planes; p++)
        for (r = 0; r < rows; r++) {
            uint8_t *d = (uint8_t *)dst + p * dst_plane_stride + r * dst_stride;
            const uint8_t *s = (const uint8_t *)src + p * src_plane_stride + r * src_stride;
            if (reading) {
                if (hal_storage_read(d, HAL_STORAGE_OFFSET(s), bytes) != 0)
                    fail("read", HAL_STORAGE_OFFSET(s));
            } else if (hal_storage_write(HAL_STORAGE_OFFSET(d), s, bytes) != 0) {
                fail("write", HAL_STORAGE_OFFSET(d));
            }
            hal_storage_bytes[!reading] += bytes;
            hal_storage_ops[!reading]++;
        }
}

#endif /* TSR_STORAGE_WINDOW */
