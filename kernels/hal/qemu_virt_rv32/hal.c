/*
 * HAL of the qemu_virt_rv32 platform: a GAP8-like cluster on QEMU's RV32
 * `virt` machine (-smp 9, -icount shift=0). Hart 0 is the fabric controller
 * (it runs main, the layer loops and the DMA); harts 1..TSR_NCORES are the
 * cluster cores that hal_fork runs the kernels on, really in parallel: each
 * hart has its own registers and stack, so a kernel that reads another
 * core's data before it is written computes a wrong result.
 *
 * RV32IMC has no atomics, so every shared word below has exactly one writer
 * (a generation counter written by the fabric controller, one done/arrival
 * word per core) and waiters compare, never read-modify-write.
 *
 * Waiting is `wfi` with the machine software interrupt enabled in `mie` (and
 * interrupts globally off, so no trap is taken): a hart that waits halts, and
 * QEMU's single-threaded round-robin (what -icount uses) moves on to a hart
 * that can work, instead of spinning out its time slice. A waker writes the
 * sleeper's CLINT msip word. Waiters clear their own msip before testing
 * their condition, so a wake-up is never lost and a stale one costs one more
 * test. Everything QEMU does here follows the instruction count, so counts
 * are the same on every run.
 *
 * Counting: minstret under -icount is the machine's instruction count,
 * shared by all harts (a halted hart adds nothing). hal_counter() is that
 * total; hal_core_counts[k] adds, per cluster core, the instructions it
 * executed from waking for a fork to finishing it, read on that shared
 * counter around its own run. QEMU runs one hart at a time and switches in
 * the middle of a hart's run only at its 0.1 s (1e8 instructions) tick; the
 * runs of other cores inside a window are then subtracted from it (see
 * count_windows).
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
#define TSR_NCORES 8
#endif

#if TSR_NCORES < 1 || TSR_NCORES > HAL_MAX_CORES
#error "TSR_NCORES must be between 1 and HAL_MAX_CORES"
#endif

#define CLINT_MSIP ((volatile uint32_t *)0x02000000u)
#define MIE_MSIE (1u << 3)

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

static inline void sleep_until_woken(void)
{
    __asm__ volatile("wfi" ::: "memory");
}

static inline void enable_wakeups(void)
{
    __asm__ volatile("csrs mie, %0" ::"r"(MIE_MSIE));
}

/* ---- fork / join ------------------------------------------------------ */

static struct {
    void (*volatile fn)(void *);
    void *volatile arg;
    volatile uint32_t gen;             /* written by the fabric controller only */
} team;

static volatile uint32_t done_gen[TSR_NCORES];   /* core k writes done_gen[k] only */
static volatile uint32_t win_start[TSR_NCORES], win_end[TSR_NCORES];
static volatile uint32_t arrived[TSR_NCORES];    /* barrier: core k writes arrived[k] only */

uint64_t hal_core_counts[HAL_MAX_CORES];
uint64_t hal_dma_bytes[HAL_MAX_DMA];
uint64_t hal_dma_copy_count;
uint32_t hal_core_count_overlaps;

static int all_done(uint32_t gen)
{
    int k;
    for (k = 0; k < TSR_NCORES; k++)
        if (done_gen[k] != gen)
            return 0;
    return 1;
}

/* Add each core's own instructions of the fork that just ended: its window
 * minus the windows of the cores that ran entirely inside it (QEMU switched
 * harts mid-function). A window that only partly overlaps another (two
 * switches inside one function: bodies of ~1e8 instructions) cannot be
 * split; hal_core_count_overlaps says how often that happened. */
static void count_windows(void)
{
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
}

void hal_fork(void (*fn)(void *), void *arg)
{
    uint32_t gen = team.gen + 1;
    int k;
    team.fn = fn;
    team.arg = arg;
    fence();
    team.gen = gen;
    fence();
    for (k = 1; k <= TSR_NCORES; k++)
        CLINT_MSIP[k] = 1;
    for (;;) {
        CLINT_MSIP[0] = 0;
        fence();
        if (all_done(gen))
            break;
        sleep_until_woken();
    }
    count_windows();
}

void hal_cluster_main(uint32_t hart)
{
    const int core = (int)hart - 1;
    uint32_t seen = 0;
    enable_wakeups();
    if (core >= TSR_NCORES) {
        /* a hart the target does not use: it never wakes for good */
        for (;;) {
            CLINT_MSIP[hart] = 0;
            sleep_until_woken();
        }
    }
    for (;;) {
        uint32_t s;
        for (;;) {
            CLINT_MSIP[hart] = 0;
            fence();
            if (team.gen != seen)
                break;
            sleep_until_woken();
        }
        s = instret32();
        seen = team.gen;
        fence();
        team.fn(team.arg);
        win_start[core] = s;
        win_end[core] = instret32();
        fence();
        done_gen[core] = seen;
        fence();
        /* the last core to finish wakes the fabric controller (two that
         * finish together may both do it: harmless) */
        if (all_done(seen))
            CLINT_MSIP[0] = 1;
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
    uint32_t mine;
    int k;
    if (hart == 0 || core >= TSR_NCORES)
        return;  /* only the cores of a fork take part */
    mine = arrived[core] + 1;
    arrived[core] = mine;
    fence();
    for (k = 0; k < TSR_NCORES; k++)
        if (k != core)
            CLINT_MSIP[k + 1] = 1;
    for (;;) {
        int all = 1;
        CLINT_MSIP[hart] = 0;
        fence();
        for (k = 0; k < TSR_NCORES; k++)
            if ((int32_t)(arrived[k] - mine) < 0)
                all = 0;
        if (all)
            break;
        sleep_until_woken();
    }
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
    return ((uint64_t)hi << 32) | lo;
}

void hal_init(void)
{
    enable_wakeups();
}

void hal_fault(uint32_t hart, uint32_t mcause, uint32_t mepc, uint32_t mtval)
{
    printf("TSR fault: hart %lu mcause 0x%lx mepc 0x%08lx mtval 0x%08lx\n", (unsigned long)hart,
           (unsigned long)mcause, (unsigned long)mepc, (unsigned long)mtval);
    fflush(stdout);
    _exit(1);
}
