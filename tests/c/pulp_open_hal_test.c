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

#define N 8

static volatile int32_t seen_core[N], seen_hart[N];
static volatile int32_t slot[N], got[N];
static volatile uint32_t sink[N];
static int with_barrier;

/* DMA buffers: the tile level is L1 (the linker's .bss.tsr.L1), the tensor
 * level L2 (.bss.tsr.L2), as the linker script places them */
static int8_t l1[4096] __attribute__((section(".bss.tsr.L1"), aligned(8)));
static int8_t l2[8192] __attribute__((section(".bss.tsr.L2"), aligned(8)));
static int8_t back[8192] __attribute__((section(".bss.tsr.L2"), aligned(8)));

static void who(void *arg)
{
    int k = hal_core_id();
    uint32_t h;
    (void)arg;
    __asm__ volatile("csrr %0, mhartid" : "=r"(h));
    seen_core[k] = k + 1;
    seen_hart[k] = (int32_t)h;
}

/* phase 1 writes this core's slot, phase 2 reads the next core's: right
 * only when the barrier separates them */
static void neighbours(void *arg)
{
    int k = hal_core_id(), n = hal_num_cores();
    (void)arg;
    slot[k] = 1000 + k;
    if (with_barrier)
        hal_barrier();
    got[k] = slot[(k + 1) % n];
}

/* core k does (k + 1) units of work: the per-core counts must follow */
static void uneven(void *arg)
{
    int k = hal_core_id();
    uint32_t i, acc = 0, units = (uint32_t)(k + 1) * (uint32_t)(uintptr_t)arg;
    for (i = 0; i < units; i++)
        acc += i ^ (acc >> 3);
    sink[k] = acc;
}

static void print_list(const char *tag, const volatile int32_t *v, int n)
{
    int k;
    printf("HAL %s", tag);
    for (k = 0; k < n; k++)
        printf(" %ld", (long)v[k]);
    printf("\n");
}

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
    int n, k, round;
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

    hal_fork(who, 0);
    print_list("core_ids", seen_core, n);
    print_list("harts", seen_hart, n);

    for (round = 0; round < 2; round++) {
        with_barrier = round;
        for (k = 0; k < n; k++)
            slot[k] = got[k] = -1;
        hal_fork(neighbours, 0);
        if (with_barrier)
            print_list("with_barrier", got, n);
    }

    for (k = 0; k < N; k++)
        hal_core_counts[k] = 0;
    hal_fork(uneven, (void *)(uintptr_t)2000);
    printf("HAL core_counts");
    for (k = 0; k < n; k++)
        printf(" %lu", (unsigned long)hal_core_counts[k]);
    printf("\n");

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
