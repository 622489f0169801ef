/*
 * Self-test of a cluster HAL (fork/join, core ids, barrier, per-core
 * counts, asynchronous DMA), run as firmware by tests/test_gap8_qemu.py.
 * Prints `HAL <check> <values>` lines; the test reads them.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/hal.h"

#define N HAL_MAX_CORES

static volatile int32_t seen_core[N];
static volatile uint32_t seen_hart[N];
static volatile int32_t slot[N], got[N];
static volatile uint32_t sink[N];
static int with_barrier;

static void who(void *arg)
{
    int k = hal_core_id();
    uint32_t h;
    (void)arg;
    __asm__ volatile("csrr %0, mhartid" : "=r"(h));
    seen_core[k] = k + 1;
    seen_hart[k] = h;
}

/* Phase 1 writes this core's slot, phase 2 reads the next core's: correct
 * only when a barrier separates them, since the next core may not have run
 * phase 1 yet. */
static void neighbours(void *arg)
{
    int k = hal_core_id(), n = hal_num_cores();
    (void)arg;
    slot[k] = 1000 + k;
    if (with_barrier)
        hal_barrier();
    got[k] = slot[(k + 1) % n];
}

/* Core k does (k + 1) units of work: the per-core counts must follow. */
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

int main(void)
{
    int n, k, round;
    static int8_t src[64], dst[64];
    hal_dma_job_t job = {0};
    hal_init();
    n = hal_num_cores();
    printf("HAL cores %d\n", n);

    hal_fork(who, 0);
    print_list("core_ids", seen_core, n);
    printf("HAL harts");
    for (k = 0; k < n; k++)
        printf(" %lu", (unsigned long)seen_hart[k]);
    printf("\n");

    for (round = 0; round < 2; round++) {
        with_barrier = round;
        for (k = 0; k < n; k++)
            slot[k] = got[k] = -1;
        hal_fork(neighbours, 0);
        print_list(with_barrier ? "with_barrier" : "without_barrier", got, n);
    }

    for (k = 0; k < N; k++)
        hal_core_counts[k] = 0;
    hal_fork(uneven, (void *)(uintptr_t)20000);
    printf("HAL core_counts");
    for (k = 0; k < n; k++)
        printf(" %lu", (unsigned long)hal_core_counts[k]);
    printf("\n");

    /* asynchronous DMA: 2D, 8 rows of 4 bytes with strides, landing no
     * later than the wait */
    for (k = 0; k < 64; k++)
        src[k] = (int8_t)k;
    hal_dma_start(&job, 0, dst, src, 4, 8, 8, 4, 1, 0, 0);
    printf("HAL dma_before_wait %d\n", dst[5]);
    hal_dma_wait(&job);
    printf("HAL dma_after_wait");
    for (k = 0; k < 32; k++)
        printf(" %d", dst[k]);
    printf("\nHAL dma_bytes %lu\n", (unsigned long)hal_dma_bytes[0]);
    printf("HAL done\n");
    return 0;
}
