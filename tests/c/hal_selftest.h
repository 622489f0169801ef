/*
 * The part of a cluster HAL's self-test every cluster target shares
 * (tests/c/hal_cluster_test.c on QEMU, tests/c/pulp_open_hal_test.c on
 * GVSoC): fork/join, core ids and harts, the barrier, per-core counts.
 * Prints `HAL <check> <values>` lines; the tests read them.
 */
#ifndef TSR_HAL_SELFTEST_H
#define TSR_HAL_SELFTEST_H

#include <stdint.h>
#include <stdio.h>

#include "tessera/hal.h"

static volatile int32_t seen_core[HAL_MAX_CORES];
static volatile uint32_t seen_hart[HAL_MAX_CORES];
static volatile int32_t slot[HAL_MAX_CORES], got[HAL_MAX_CORES];
static volatile uint32_t sink[HAL_MAX_CORES];
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

/* The checks on n cores: core_ids, harts, with_barrier (and, with
 * print_race, without_barrier: a race is visible only where cores run
 * truly in parallel), core_counts after core k did (k + 1) * units loops. */
static void cluster_checks(int n, uint32_t units, int print_race)
{
    int k, round;
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
        if (with_barrier || print_race)
            print_list(with_barrier ? "with_barrier" : "without_barrier", got, n);
    }

    for (k = 0; k < HAL_MAX_CORES; k++)
        hal_core_counts[k] = 0;
    hal_fork(uneven, (void *)(uintptr_t)units);
    printf("HAL core_counts");
    for (k = 0; k < n; k++)
        printf(" %lu", (unsigned long)hal_core_counts[k]);
    printf("\n");
}

#endif
