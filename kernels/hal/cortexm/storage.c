/*
 * The storage driver of Cortex-M targets under QEMU: the SD card is a file
 * on the machine running QEMU, read and written through Arm semihosting
 * (SYS_OPEN, SYS_SEEK, SYS_READ, SYS_WRITE), so the network's data really
 * lives outside the MCU's memory. The build writes the card's image
 * (storage.bin: weights, then room for swapped activations); the runner
 * passes a scratch copy's path as the argument `storage=<path>`.
 *
 * This is the one file a board port replaces: on an STM32F746 the same four
 * functions drive SDMMC1 with DMA2 (block reads and writes of `block`
 * bytes). hal_storage_issue queues a request on the card's one channel
 * (on the board: the SDMMC's DMA, completion in order); under QEMU the
 * semihosting call completes it at issue, so a wait finds it done. A
 * semihosting call takes no guest instructions, so the counts hold compute
 * and copies only.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tessera/hal.h"

#ifdef TSR_STORAGE_WINDOW   /* only targets with a storage level have a card */

#define SYS_OPEN 0x01
#define SYS_WRITE 0x05
#define SYS_READ 0x06
#define SYS_SEEK 0x0A
#define SYS_FLEN 0x0C
#define MODE_RB_PLUS 3      /* fopen "r+b": read and write, no truncation */

uint64_t hal_storage_bytes[2];
uint32_t hal_storage_ops[2];
static int card = -1;

static int semihost(int op, void *args)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = args;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static int length(const char *s)
{
    int n = 0;
    while (s[n])
        n++;
    return n;
}

int hal_storage_open(const char *path)
{
    uint32_t args[3] = {(uint32_t)(uintptr_t)path, MODE_RB_PLUS, (uint32_t)length(path)};
    card = semihost(SYS_OPEN, args);
    return card < 0 ? -1 : 0;
}

static void fail(const char *what, uint32_t offset)
{
    fprintf(stderr, "tessera storage: %s at offset %lu failed (no card: run with storage=<image>)\n", what,
            (unsigned long)offset);
    exit(3);
}

static int seek(uint32_t offset)
{
    uint32_t args[2] = {(uint32_t)card, offset};
    return card < 0 ? -1 : semihost(SYS_SEEK, args);
}

int hal_storage_read(void *dst, uint32_t offset, uint32_t bytes)
{
    uint32_t args[3] = {(uint32_t)card, (uint32_t)(uintptr_t)dst, bytes};
    if (seek(offset) != 0)
        return -1;
    return semihost(SYS_READ, args) == 0 ? 0 : -1;   /* returns the bytes not read */
}

int hal_storage_write(uint32_t offset, const void *src, uint32_t bytes)
{
    uint32_t args[3] = {(uint32_t)card, (uint32_t)(uintptr_t)src, bytes};
    if (seek(offset) != 0)
        return -1;
    return semihost(SYS_WRITE, args) == 0 ? 0 : -1;  /* returns the bytes not written */
}

/* the request queue: requests complete in issue order */
static uint32_t issued, completed;

void hal_storage_reset_queue(void)
{
    issued = completed = 0;
}

uint32_t hal_storage_issue(int write, uint32_t offset, void *sram, uint32_t bytes)
{
    if (write ? hal_storage_write(offset, sram, bytes) != 0 : hal_storage_read(sram, offset, bytes) != 0)
        fail(write ? "write" : "read", offset);
    hal_storage_bytes[write != 0] += bytes;
    hal_storage_ops[write != 0]++;
    completed = issued + 1;     /* semihosting: done at issue */
    return issued++;
}

void hal_storage_wait_for(uint32_t n)
{
    if (n >= issued) {
        fprintf(stderr, "tessera storage: wait for request %lu, only %lu issued\n", (unsigned long)n,
                (unsigned long)issued);
        exit(3);
    }
    while (completed <= n)
        ;                       /* a board port polls its DMA here */
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
