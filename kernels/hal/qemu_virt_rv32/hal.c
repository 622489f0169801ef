/*
 * HAL of the qemu_virt_rv32 platform: a GAP8-like cluster on QEMU's RV32
 * `virt` machine (-smp 9, -icount shift=0). Hart 0 is the fabric controller
 * (it runs main, the layer loops and the DMA); harts 1..TSR_NCORES are the
 * cluster cores that hal_fork runs the kernels on, really in parallel: each
 * hart has its own registers and stack, so a kernel that reads another
 * core's data before it is written computes a wrong result.
 *
 * RV32IMC has no atomics, so every shared word below has exactly one writer,
 * and every wake-up is sent exactly once and waited for exactly once, on
 * one of two channels of the CLINT: a hart's software interrupt (msip: "go",
 * fork start, barrier release, fork end to the fabric controller) and its
 * timer interrupt (mtimecmp set to 0: "done", from core k + 1 to core k, at
 * a barrier and at the end of a fork; the cores join in a chain). A waiter
 * enables only its channel in `mie` (interrupts stay globally off: no trap)
 * and executes `wfi`: it halts until the wake-up is pending, or goes straight
 * on if it already is. So a hart executes the same instructions whatever
 * order QEMU runs the harts in, and the counts are the same on every run;
 * and a waiting hart halts, so QEMU's single-threaded round robin (what
 * -icount uses) moves on to a hart that can work instead of spinning.
 *
 * Counting: minstret under -icount is the machine's instruction count,
 * shared by all harts (a halted hart adds nothing). hal_counter() is that
 * total, less the HAL's own per-core bookkeeping. hal_core_counts[k] adds
 * up core k's forked functions, each read on that shared counter around the
 * function. QEMU runs one hart at a time and mostly lets a hart finish; near
 * its scheduling tick (every 1e8 instructions) it switches harts
 * mid-function: windows of other cores entirely inside one are then
 * subtracted from it, windows that only partly overlap are counted in
 * hal_core_count_overlaps (their split is approximate, and may differ
 * between runs; the totals do not).
 *
 * DMA: a transfer is queued at hal_dma_start and copied, in start order,
 * when a wait needs it (or when the queue is full): the latest moment the
 * asynchronous contract allows, so code that reads a buffer before waiting
 * for it sees stale data here. Only the fabric controller starts and waits
 * for transfers. The instructions the copies take are counted apart
 * (hal_dma_copy_count): on GAP8 the DMA engines move the bytes, not a core.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tessera/hal.h"

#ifndef TSR_NCORES
#error "TSR_NCORES (the cluster's core count) must be defined"
#endif

#if TSR_NCORES < 1 || TSR_NCORES > HAL_MAX_CORES
#error "TSR_NCORES must be between 1 and HAL_MAX_CORES"
#endif

#define CLINT_MSIP ((volatile uint32_t *)0x02000000u)
#define CLINT_MTIMECMP ((volatile uint32_t *)0x02004000u)   /* 64-bit per hart: lo, hi */
#define MIE_MSIE (1u << 3)
#define MIE_MTIE (1u << 7)

#define fence() __asm__ volatile("fence rw, rw" ::: "memory")

static inline uint32_t hart_id(void)
{
    uint32_t v;
    __asm__ volatile("csrr %0, mhartid" : "=r"(v));
    return v;
}

static inline uint32_t instret32(void)
{
    uint32_t v;
    __asm__ volatile("csrr %0, minstret" : "=r"(v));
    return v;
}

/* Wait for a wake-up on one channel, then take it down. */
static inline void wait_go(uint32_t hart)
{
    __asm__ volatile("csrw mie, %0\n\twfi" ::"r"(MIE_MSIE) : "memory");
    CLINT_MSIP[hart] = 0;
    fence();
}

static inline void wait_done(uint32_t hart)
{
    __asm__ volatile("csrw mie, %0\n\twfi" ::"r"(MIE_MTIE) : "memory");
    CLINT_MTIMECMP[2 * hart + 1] = 0xffffffffu;   /* high word first: never 0 on the way */
    CLINT_MTIMECMP[2 * hart] = 0xffffffffu;
    fence();
}

static inline void send_go(uint32_t hart)
{
    fence();
    CLINT_MSIP[hart] = 1;
}

static inline void send_done(uint32_t hart)
{
    fence();
    CLINT_MTIMECMP[2 * hart] = 0;                 /* low word first: 0 <= mtime raises it */
    CLINT_MTIMECMP[2 * hart + 1] = 0;
}

/* ---- fork / join ------------------------------------------------------ */

static struct {
    void (*volatile fn)(void *);
    void *volatile arg;
    volatile uint32_t gen;             /* written by the fabric controller only */
} team;

static volatile uint32_t win_start[TSR_NCORES], win_end[TSR_NCORES];

uint64_t hal_core_counts[HAL_MAX_CORES];
uint64_t hal_dma_bytes[HAL_MAX_DMA];
uint64_t hal_dma_copy_count;
uint32_t hal_core_count_overlaps;

static uint64_t uncounted;   /* instructions count_windows took: not the program's */

/* Add each core's own instructions of the fork that just ended: its window
 * minus the windows of the cores that ran entirely inside it (QEMU switched
 * harts mid-function). A window that only partly overlaps another cannot be
 * split; hal_core_count_overlaps says how often that happened. */
static void count_windows(void)
{
    uint32_t t0 = instret32();
    int k, j;
    for (k = 0; k < TSR_NCORES; k++) {
        uint32_t s = win_start[k], e = win_end[k], own = e - s;
        for (j = 0; j < TSR_NCORES; j++) {
            if (j == k || (int32_t)(win_start[j] - s) <= 0 || (int32_t)(win_start[j] - e) >= 0)
                continue;
            if ((int32_t)(e - win_end[j]) > 0)
                own -= win_end[j] - win_start[j];
            else
                hal_core_count_overlaps++;
        }
        hal_core_counts[k] += own;
    }
    /* its branches follow how QEMU interleaved the harts: leave it out of
     * hal_counter() so the counts stay the same on every run */
    uncounted += instret32() - t0;
}

void hal_fork(void (*fn)(void *), void *arg)
{
    uint32_t k;
    team.fn = fn;
    team.arg = arg;
    team.gen = team.gen + 1;
    for (k = 1; k <= TSR_NCORES; k++)
        send_go(k);
    wait_go(0);           /* core 0 says so once every core has finished */
    count_windows();
}

/* Core `core` (hart core + 1) has finished a phase: wait for the core after
 * it to finish too, then tell the one before it (core 0: everyone has). */
static void join_chain(int core)
{
    if (core + 1 < TSR_NCORES)
        wait_done((uint32_t)core + 1);
    if (core > 0)
        send_done((uint32_t)core);
}

void hal_cluster_main(uint32_t hart)
{
    const int core = (int)hart - 1;
    uint32_t seen = 0;
    for (;;) {
        uint32_t s;
        wait_go(hart);
        if (team.gen == seen)
            continue;      /* not a fork (cannot happen: every go is for one) */
        s = instret32();
        seen = team.gen;
        team.fn(team.arg);
        win_start[core] = s;
        win_end[core] = instret32();
        join_chain(core);
        if (core == 0)
            send_go(0);
    }
}

int hal_core_id(void)
{
    uint32_t h = hart_id();
    return h ? (int)h - 1 : 0;
}

int hal_num_cores(void)
{
    return TSR_NCORES;
}

void hal_barrier(void)
{
    const uint32_t hart = hart_id();
    const int core = (int)hart - 1;
    uint32_t k;
    if (hart == 0 || core >= TSR_NCORES)
        return;  /* only the cores of a fork take part */
    join_chain(core);          /* arrivals travel down to core 0 ... */
    if (core > 0) {
        wait_go(hart);         /* ... which releases everyone */
        return;
    }
    for (k = 2; k <= TSR_NCORES; k++)
        send_go(k);
}

/* ---- DMA: a queue of transfers, copied no later than their wait --------- */

#define DMA_QUEUE 64

typedef struct {
    int8_t *dst;
    const int8_t *src;
    uint32_t bytes, rows, src_stride, dst_stride, planes, src_plane_stride, dst_plane_stride;
} xfer_t;

static xfer_t queue[DMA_QUEUE];
static uint32_t issued, completed;   /* tickets: transfer n is queue[n % DMA_QUEUE] */

static void copy_row(int8_t *d, const int8_t *s, uint32_t n)
{
    if (n >= 16) {
        memcpy(d, s, n);
        return;
    }
    while (n--)       /* short rows (CHW gathers move single bytes): no call */
        *d++ = *s++;
}

static void complete_one(void)
{
    const xfer_t *x = &queue[completed % DMA_QUEUE];
    uint32_t t0 = instret32(), p, r;
    for (p = 0; p < x->planes; p++) {
        int8_t *d = x->dst + p * x->dst_plane_stride;
        const int8_t *s = x->src + p * x->src_plane_stride;
        for (r = 0; r < x->rows; r++, d += x->dst_stride, s += x->src_stride)
            copy_row(d, s, x->bytes);
    }
    completed++;
    hal_dma_copy_count += instret32() - t0;
}

void hal_dma_start(hal_dma_job_t *job, int engine, void *dst, const void *src,
                   uint32_t bytes, uint32_t rows, uint32_t src_stride, uint32_t dst_stride,
                   uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride)
{
    xfer_t *x;
    if (issued - completed == DMA_QUEUE)
        complete_one();   /* a full queue: the oldest transfer lands now */
    x = &queue[issued % DMA_QUEUE];
    x->dst = (int8_t *)dst;
    x->src = (const int8_t *)src;
    x->bytes = bytes;
    x->rows = rows;
    x->src_stride = src_stride;
    x->dst_stride = dst_stride;
    x->planes = planes;
    x->src_plane_stride = src_plane_stride;
    x->dst_plane_stride = dst_plane_stride;
    issued++;
    job->pending = issued;   /* the job is done when this ticket is */
    hal_dma_bytes[engine] += (uint64_t)bytes * rows * planes;
}

void hal_dma_wait(hal_dma_job_t *job)
{
    while ((int32_t)(completed - job->pending) < 0)
        complete_one();
    job->pending = 0;
}

/* ---- counting, start-up, faults ---------------------------------------- */

uint64_t hal_counter(void)
{
    uint32_t hi, lo, hi2;
    do {
        __asm__ volatile("csrr %0, minstreth" : "=r"(hi));
        __asm__ volatile("csrr %0, minstret" : "=r"(lo));
        __asm__ volatile("csrr %0, minstreth" : "=r"(hi2));
    } while (hi != hi2);
    return (((uint64_t)hi << 32) | lo) - uncounted;
}

void hal_init(void)
{
    uint32_t h;
    /* the timer interrupt is the "done" channel: start with none pending,
     * whatever mtimecmp held after reset */
    for (h = 0; h <= TSR_NCORES; h++) {
        CLINT_MTIMECMP[2 * h + 1] = 0xffffffffu;
        CLINT_MTIMECMP[2 * h] = 0xffffffffu;
    }
    fence();
}

void hal_fault(uint32_t hart, uint32_t mcause, uint32_t mepc, uint32_t mtval)
{
    printf("TSR fault: hart %lu mcause 0x%lx mepc 0x%08lx mtval 0x%08lx\n", (unsigned long)hart,
           (unsigned long)mcause, (unsigned long)mepc, (unsigned long)mtval);
    fflush(stdout);
    _exit(1);
}
