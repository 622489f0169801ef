/*
 * Self-test of the pulp_open HAL on GVSoC (fork/join over the cluster,
 * core ids, the event unit's barrier, per-core cycle counts, mchan DMA in
 * every shape the generated code uses, arguments from the runner), run as
 * firmware by tests/test_gvsoc.py. Prints `HAL <check> <values>` lines.
 * With argument `fault` it executes an illegal instruction; with `hang` it
 * waits forever.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/hal.h"
#include "hal_selftest.h"

/* DMA buffers: the tile level is L1 (the linker's .bss.tsr.L1), the tensor
 * level L2 (.bss.tsr.L2), as the linker script places them */
static int8_t l1[4096] __attribute__((section(".bss.tsr.L1"), aligned(8)));
static int8_t l2[8192] __attribute__((section(".bss.tsr.L2"), aligned(8)));
static int8_t back[8192] __attribute__((section(".bss.tsr.L2"), aligned(8)));

/* planes x rows x bytes from L2 (strides ss, sps) into compact L1, then
 * back out into `back` with the same strides; count wrong bytes both ways */
static int box(uint32_t off, uint32_t bytes, uint32_t rows, uint32_t ss, uint32_t planes, uint32_t sps)
{
    hal_dma_job_t job = {0};
    uint32_t p, r, b, bad = 0;
    memset(l1, 0x55, sizeof l1);
    memset(back, 0, sizeof back);
    hal_dma_start(&job, 0, l1, l2 + off, bytes, rows, ss, bytes, planes, sps, bytes * rows);
    hal_dma_wait(&job);
    hal_dma_start(&job, 0, back + off, l1, bytes, rows, bytes, ss, planes, bytes * rows, sps);
    hal_dma_wait(&job);
    for (p = 0; p < planes; p++)
        for (r = 0; r < rows; r++)
            for (b = 0; b < bytes; b++) {
                uint32_t i = off + p * sps + r * ss + b;
                bad += l1[(p * rows + r) * bytes + b] != l2[i];
                bad += back[i] != l2[i];
            }
    return (int)bad;
}

int main(int argc, char **argv)
{
    int n, k;
    hal_dma_job_t job = {0};
    uint64_t t0;
    hal_init();
    n = hal_num_cores();
    printf("HAL cores %d\n", n);
    printf("HAL args");
    for (k = 1; k < argc; k++)
        printf(" %s", argv[k]);
    printf("\n");
    if (argc > 1 && strcmp(argv[1], "fault") == 0)
        __asm__ volatile(".word 0");   /* an illegal instruction */
    if (argc > 1 && strcmp(argv[1], "hang") == 0)
        for (;;)
            __asm__ volatile("wfi");

    cluster_checks(n, 2000, 0);

    for (k = 0; k < (int)sizeof l2; k++)
        l2[k] = (int8_t)(k * 7 + 3);
    printf("HAL dma_1d %d\n", box(5, 3000, 1, 0, 1, 0));
    printf("HAL dma_2d %d\n", box(3, 24, 40, 96, 1, 0));
    printf("HAL dma_3d %d\n", box(1, 5, 12, 32, 6, 1000));
    printf("HAL dma_rows_contiguous %d\n", box(0, 64, 16, 64, 2, 2048));
    /* strided on the L1 side: issued row by row */
    memset(back, 0, sizeof back);
    hal_dma_start(&job, 0, l1, l2, 8, 16, 8, 32, 1, 0, 0);
    hal_dma_wait(&job);
    hal_dma_start(&job, 0, back, l1, 8, 16, 32, 8, 1, 0, 0);
    hal_dma_wait(&job);
    printf("HAL dma_l1_strided %d\n", memcmp(back, l2, 128) != 0);
    /* several copies on one job, one wait */
    memset(l1, 0, 64);
    hal_dma_start(&job, 0, l1, l2, 16, 1, 0, 0, 1, 0, 0);
    hal_dma_start(&job, 0, l1 + 16, l2 + 100, 16, 1, 0, 0, 1, 0, 0);
    hal_dma_start(&job, 0, l1 + 32, l2 + 200, 4, 4, 50, 4, 1, 0, 0);
    hal_dma_wait(&job);
    printf("HAL dma_one_job %d\n", (memcmp(l1, l2, 16) != 0) + (memcmp(l1 + 16, l2 + 100, 16) != 0) +
                                       (memcmp(l1 + 32, l2 + 200, 4) != 0) + (memcmp(l1 + 44, l2 + 350, 4) != 0));
    printf("HAL dma_bytes %lu\n", (unsigned long)hal_dma_bytes[0]);
    t0 = hal_counter();
    printf("HAL counter_increases %d\n", hal_counter() > t0);
    printf("HAL done\n");
    return 0;
}
