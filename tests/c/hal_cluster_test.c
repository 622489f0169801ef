/*
 * Self-test of a cluster HAL (fork/join, core ids, barrier, per-core
 * counts, asynchronous DMA), run as firmware by tests/test_gap8_qemu.py.
 * Prints `HAL <check> <values>` lines; the test reads them.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/hal.h"
#include "hal_selftest.h"

int main(void)
{
    int n, k;
    static int8_t src[64], dst[64];
    hal_dma_job_t job = {0};
    hal_init();
    n = hal_num_cores();
    printf("HAL cores %d\n", n);

    cluster_checks(n, 20000, 1);

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
