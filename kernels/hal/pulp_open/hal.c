/*
 * HAL of PULP-open under GVSoC, bare metal (no PULP SDK): the fabric
 * controller (FC) boots the 8-core cluster and sleeps; cluster core 0 runs
 * main() (the network and its tile loops, issuing DMA) and forks each
 * tile's kernel over the cluster's cores; the other cores wait on the event
 * unit's hardware barrier, clock-gated, between forks. DMA is the cluster's
 * mchan (L2 <-> L1), cycles are mcycle of the cluster clock, the console is
 * GVSoC's per-core stdout peripheral behind picolibc's stdio.
 *
 * TSR_NCORES (the target's cores) is how many cluster cores take part; the
 * others are never started.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pulp_open.h"
#include "tessera/hal.h"

#ifndef TSR_NCORES
#define TSR_NCORES PO_CL_MAX_CORES
#endif
#if TSR_NCORES < 1 || TSR_NCORES > PO_CL_MAX_CORES
#error "pulp_open: the cluster has 1 to 8 cores (target YAML cores:)"
#endif

#define TEAM_MASK ((1u << TSR_NCORES) - 1u)

#ifdef TSR_STORAGE_WINDOW
/* storage.c: a strided copy from the HyperFlash (L3) */
void hal_storage_dma(void *dst, const void *src, uint32_t bytes, uint32_t rows, uint32_t src_stride,
                     uint32_t dst_stride, uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride);
#endif

extern int main(int argc, char **argv);
extern void _cluster_start(void);
extern void tsr_trap_vector(void);
extern char __bss_start[], __bss_end[];   /* TLS bss through .bss, in L2 */

/* The HAL's variables the cluster touches per tile and per fork live in L1
 * (the target's memory.L1.reserved.hal area; in L2 an access from the
 * cluster takes about 15 cycles). NOLOAD: core 0 clears them at start. */
extern char __tsr_hal_start[], __tsr_hal_end[];

HAL_L1 uint64_t hal_dma_bytes[HAL_MAX_DMA];
/* Per core, the cycles spent inside forked functions (each core writes its
 * own entry; core 0 reads them after the join): the work split. DMA is
 * hardware, so no core time goes to copies unless a copy is not L1<->L2. */
HAL_L1 uint64_t hal_core_counts[HAL_MAX_CORES];
HAL_L1 uint64_t hal_dma_copy_count;
HAL_L1 uint32_t hal_core_count_overlaps;

/* The runner writes the firmware's arguments here, in the ELF file itself
 * (GVSoC has no command line for the simulated program): space separated,
 * NUL terminated. Initialized, so it stays in the file. */
__attribute__((section(".data.tsr_cmdline"), used)) char tsr_cmdline[256] = {0};

/* ---- console and exit ------------------------------------------------ */

static int console_put(char c, FILE *f)
{
    (void)f;
    *(volatile uint8_t *)PO_STDOUT(po_cluster_id(), po_core_id()) = (uint8_t)c;
    return (unsigned char)c;
}

static FILE console = FDEV_SETUP_STREAM(console_put, NULL, NULL, _FDEV_SETUP_WRITE);
FILE *const stdout = &console;
FILE *const stderr = &console;

void _exit(int status)
{
    /* GVSoC exits with this status (non-zero: gvsoc itself exits 1) */
    PO_REG(PO_SOC_CORESTATUS) = PO_SOC_EOC | ((uint32_t)status & 0x7FFFFFFFu);
    for (;;)
        __asm__ volatile("wfi");
}

static void put_str(const char *s)
{
    while (*s)
        console_put(*s++, 0);
}

static void put_hex(uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    int k;
    for (k = 28; k >= 0; k -= 4)
        console_put(digits[(v >> k) & 15], 0);
}

/* Every exception lands here (PULP cores report mcause 0xb for all of
 * them; mepc says where): one line, then exit status 3, instead of a hang. */
void tsr_trap(void)
{
    uint32_t epc, tval;
    __asm__ volatile("csrr %0, mepc" : "=r"(epc));
    __asm__ volatile("csrr %0, mtval" : "=r"(tval));
    put_str("\nTSR fault: exception on cluster ");
    put_hex(po_cluster_id());
    put_str(" core ");
    put_hex(po_core_id());
    put_str(" at pc 0x");
    put_hex(epc);
    put_str(" (mtval 0x");
    put_hex(tval);
    put_str(")\n");
    _exit(3);
}

/* ---- boot ------------------------------------------------------------- */

static void install_trap(void)
{
    __asm__ volatile("csrw mtvec, %0" : : "r"((uint32_t)tsr_trap_vector));
}

/* On the FC, before any cluster core runs. */
void tsr_fc_boot(void)
{
    int i;
    install_trap();
    /* the tile arena in L1 needs no zeroing: every byte is written before
     * it is read */
    memset(__bss_start, 0, (size_t)(__bss_end - __bss_start));
    /* without the instruction caches every fetch goes to L2: 2-3x slower */
    PO_REG(PO_FC_ICACHE_ENABLE) = 0xFFFFFFFFu;
    PO_REG(PO_CL_ICACHE_ENABLE) = 0xFFFFFFFFu;
    for (i = 0; i < TSR_NCORES; i++)
        PO_REG(PO_CL_BOOT_ADDR(i)) = (uint32_t)_cluster_start;
    /* core 0 first: it sets the barrier up, then starts the others */
    PO_REG(PO_CL_FETCH_ENABLE) = 1u;
}

/* The fork a worker runs next: written by core 0 before the start barrier. */
static HAL_L1 void (*volatile fork_fn)(void *);
static HAL_L1 void *volatile fork_arg;

static inline void barrier(void)
{
    /* arrive at barrier 0 and sleep until the whole team has arrived */
    (void)PO_REG(PO_EU_BARRIER(0) + PO_EU_BARRIER_WAIT_CLEAR);
}

static int split_args(char **argv, int max)
{
    int argc = 0;
    char *p = tsr_cmdline;
    argv[argc++] = "firmware";
    while (*p && argc < max - 1) {
        while (*p == ' ')
            *p++ = 0;
        if (!*p)
            break;
        argv[argc++] = p;
        while (*p && *p != ' ')
            p++;
    }
    argv[argc] = 0;
    return argc;
}

static inline uint32_t mcycle(void)
{
    uint32_t now;
    __asm__ volatile("csrr %0, mcycle" : "=r"(now));
    return now;
}

/* fn(arg) on this core, its cycles added to the core's count */
static inline void run_counted(void (*fn)(void *), void *arg, int core)
{
    uint32_t t0 = mcycle();
    fn(arg);
    hal_core_counts[core] += (uint32_t)(mcycle() - t0);
}

static void worker_loop(int core)
{
    for (;;) {
        barrier();  /* start: fork_fn and fork_arg are published */
        run_counted(fork_fn, fork_arg, core);
        barrier();  /* join */
    }
}

/* Every cluster core, on its own L1 stack. */
void tsr_cluster_entry(int core)
{
    if (core == 0)   /* before any other core starts */
        memset(__tsr_hal_start, 0, (size_t)(__tsr_hal_end - __tsr_hal_start));
    install_trap();
    PO_REG(PO_EU_CORE_MASK) = 1u << PO_EU_BARRIER_EVENT;
    if (core == 0) {
        char *argv[8];
        int argc;
        PO_REG(PO_EU_BARRIER(0) + PO_EU_BARRIER_TRIGGER_MASK) = TEAM_MASK;
        PO_REG(PO_EU_BARRIER(0) + PO_EU_BARRIER_TARGET_MASK) = TEAM_MASK;
        PO_REG(PO_CL_FETCH_ENABLE) = TEAM_MASK;   /* a rising edge only for cores 1.. */
        argc = split_args(argv, 8);
        exit(main(argc, argv));
    }
    worker_loop(core);
}

void hal_init(void)
{
    /* everything is set up at boot, before main */
}

/* ---- cores ---------------------------------------------------------- */

void hal_fork(void (*fn)(void *), void *arg)
{
#if TSR_NCORES > 1
    fork_fn = fn;
    fork_arg = arg;
    barrier();
    run_counted(fn, arg, 0);
    barrier();
#else
    run_counted(fn, arg, 0);
#endif
}

int hal_core_id(void)
{
    return (int)po_core_id();
}

int hal_num_cores(void)
{
    return TSR_NCORES;
}

void hal_barrier(void)
{
#if TSR_NCORES > 1
    barrier();
#endif
}

/* ---- DMA -------------------------------------------------------------- */

/* The last transfer id this core took: commands pushed since then count
 * on it, so a job that still owns it needs no new one. */
static HAL_L1 int last_id[PO_CL_MAX_CORES];

static inline int in_l1(const void *p)
{
    uint32_t a = (uint32_t)p;
    return a - PO_L1_BASE < PO_L1_SIZE;
}

/* One command: `bytes` contiguous bytes in L1, `rows` rows of `len` bytes
 * `ext_stride` apart in L2 (rows == 1: contiguous there too). */
static void dma_push(uint32_t dir, uint32_t l1, uint32_t ext, uint32_t len, uint32_t rows,
                     uint32_t ext_stride)
{
    uint32_t bytes = len * rows;
    if (rows == 1 || ext_stride == len) {
        PO_REG(PO_DMA_CMD) = bytes | dir | PO_DMA_INC;
        PO_REG(PO_DMA_CMD) = l1;
        PO_REG(PO_DMA_CMD) = ext;
    } else {
        PO_REG(PO_DMA_CMD) = bytes | dir | PO_DMA_INC | PO_DMA_2D_EXT;
        PO_REG(PO_DMA_CMD) = l1;
        PO_REG(PO_DMA_CMD) = ext;
        PO_REG(PO_DMA_CMD) = len;
        PO_REG(PO_DMA_CMD) = ext_stride;
    }
}

/* `rows` rows of `len` bytes, contiguous in L1, split so that no command
 * exceeds the 17-bit length field. */
static void dma_rows(uint32_t dir, uint32_t l1, uint32_t ext, uint32_t len, uint32_t rows,
                     uint32_t ext_stride)
{
    if (rows == 1 || ext_stride == len) {
        uint32_t total = len * rows, chunk;
        while (total) {
            chunk = total > PO_DMA_LEN_MAX ? (PO_DMA_LEN_MAX & ~7u) : total;
            dma_push(dir, l1, ext, chunk, 1, 0);
            l1 += chunk;
            ext += chunk;
            total -= chunk;
        }
        return;
    }
    while (rows) {
        uint32_t n = rows, max_rows = PO_DMA_LEN_MAX / len;
        if (n > max_rows)
            n = max_rows;
        dma_push(dir, l1, ext, len, n, ext_stride);
        l1 += n * len;
        ext += n * ext_stride;
        rows -= n;
    }
}

/* This core's job takes a transfer id unless it already owns the last one
 * this core took (commands pushed since then count on it). */
static inline void take_id(hal_dma_job_t *job, int core)
{
    if (!(job->pending & (1u << last_id[core]))) {
        int id = (int)PO_REG(PO_DMA_CMD);   /* stalls while all ids are taken */
        last_id[core] = id;
        job->pending |= 1u << id;
    }
}

/* The general case, out of line: copies that are not L1<->L2, the uDMA,
 * L1-side strides, 3D boxes. */
static __attribute__((noinline)) void dma_general(hal_dma_job_t *job, void *dst, const void *src, uint32_t bytes,
                                                  uint32_t rows, uint32_t src_stride, uint32_t dst_stride,
                                                  uint32_t planes, uint32_t src_plane_stride,
                                                  uint32_t dst_plane_stride)
{
    const int core = (int)po_core_id();
    uint32_t dir, l1, ext, l1_stride, ext_stride, l1_pstride, ext_pstride, p, r;
#ifdef TSR_STORAGE_WINDOW
    if (HAL_IN_STORAGE(src) || HAL_IN_STORAGE(dst)) {
        /* queued on the uDMA: the job's wait waits for it */
        hal_storage_dma(dst, src, bytes, rows, src_stride, dst_stride, planes, src_plane_stride,
                        dst_plane_stride);
        job->pending |= PO_JOB_HYPER;
        return;
    }
#endif
    if (in_l1(dst) == in_l1(src)) {
        /* mchan only moves between L1 and L2: copy any other pair here */
        uint32_t t0 = mcycle();
        for (p = 0; p < planes; p++)
            for (r = 0; r < rows; r++)
                memcpy((char *)dst + p * dst_plane_stride + r * dst_stride,
                       (const char *)src + p * src_plane_stride + r * src_stride, bytes);
        hal_dma_copy_count += (uint32_t)(mcycle() - t0);
        return;
    }
    if (in_l1(dst)) {
        dir = PO_DMA_TO_L1;
        l1 = (uint32_t)dst, ext = (uint32_t)src;
        l1_stride = dst_stride, ext_stride = src_stride;
        l1_pstride = dst_plane_stride, ext_pstride = src_plane_stride;
    } else {
        dir = 0;
        l1 = (uint32_t)src, ext = (uint32_t)dst;
        l1_stride = src_stride, ext_stride = dst_stride;
        l1_pstride = src_plane_stride, ext_pstride = dst_plane_stride;
    }
    /* fold dimensions that are contiguous on both sides */
    if (rows == 1)
        l1_stride = ext_stride = bytes;
    if (l1_stride == bytes && ext_stride == bytes) {
        bytes *= rows;
        rows = 1;
    }
    if (planes == 1)
        l1_pstride = l1_stride * rows, ext_pstride = ext_stride * rows;
    if (l1_pstride == l1_stride * rows && ext_pstride == ext_stride * rows) {
        /* planes continue the rows on both sides (a CHW gather of whole
         * tensor rows): one 2D transfer instead of one per plane */
        rows *= planes;
        planes = 1;
        if (l1_stride == bytes && ext_stride == bytes) {
            bytes *= rows;
            rows = 1;
        }
    }
    take_id(job, core);
    for (p = 0; p < planes; p++) {
        uint32_t pl1 = l1 + p * l1_pstride, pext = ext + p * ext_pstride;
        if (l1_stride == bytes || rows == 1) {
            /* a plane is contiguous in L1: one 2D command (rows in L2) */
            dma_rows(dir, pl1, pext, bytes, rows, ext_stride);
        } else {
            for (r = 0; r < rows; r++)
                dma_rows(dir, pl1 + r * l1_stride, pext + r * ext_stride, bytes, 1, 0);
        }
    }
}

/* The tiles' usual copies, straight: one 2D (or 1D) command between L2 and
 * an L1 buffer contiguous in L1 (the generated tile loops issue a few per
 * tile; a command's register writes take about 15 cycles each, the C
 * around them should not take more). 0: not such a copy. */
static inline int dma_straight(hal_dma_job_t *job, void *dst, const void *src, uint32_t bytes, uint32_t rows,
                               uint32_t src_stride, uint32_t dst_stride, uint32_t total)
{
    uint32_t l1, ext, dir;
    const int to_l1 = in_l1(dst);
    if (total > PO_DMA_LEN_MAX)
        return 0;
    if (to_l1 && !in_l1(src) && (rows == 1 || dst_stride == bytes)) {
        dir = PO_DMA_TO_L1, l1 = (uint32_t)dst, ext = (uint32_t)src;
    } else if (!to_l1 && in_l1(src) && (rows == 1 || src_stride == bytes)) {
        dir = 0, l1 = (uint32_t)src, ext = (uint32_t)dst;
        src_stride = dst_stride;   /* the L2 side's */
    } else {
        return 0;
    }
#ifdef TSR_STORAGE_WINDOW
    if (HAL_IN_STORAGE(src) || HAL_IN_STORAGE(dst))
        return 0;
#endif
    take_id(job, (int)po_core_id());
    dma_push(dir, l1, ext, bytes, rows, rows == 1 ? bytes : src_stride);
    return 1;
}

void hal_dma_start(hal_dma_job_t *job, int engine, void *dst, const void *src,
                   uint32_t bytes, uint32_t rows, uint32_t src_stride, uint32_t dst_stride,
                   uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride)
{
    const uint32_t total = bytes * rows * planes;   /* a tile: far below 4 GB */
    if (!total)
        return;
    hal_dma_bytes[engine] += total;
    if (planes == 1 && dma_straight(job, dst, src, bytes, rows, src_stride, dst_stride, total))
        return;
    dma_general(job, dst, src, bytes, rows, src_stride, dst_stride, planes, src_plane_stride, dst_plane_stride);
}

/* tile.h's short entries (hal.h, TSR_HAL_DMA_RUNS): fewer arguments to set
 * up at each of the tile loop's calls, less code on core 0's path between
 * two forks. */
void hal_dma_rows(hal_dma_job_t *job, int engine, void *dst, const void *src, uint32_t bytes, uint32_t rows,
                  uint32_t src_stride, uint32_t dst_stride)
{
    const uint32_t total = bytes * rows;
    if (!total)
        return;
    hal_dma_bytes[engine] += total;
    if (!dma_straight(job, dst, src, bytes, rows, src_stride, dst_stride, total))
        dma_general(job, dst, src, bytes, rows, src_stride, dst_stride, 1, 0, 0);
}

void hal_dma_run(hal_dma_job_t *job, int engine, void *dst, const void *src, uint32_t bytes)
{
    if (!bytes)
        return;
    hal_dma_bytes[engine] += bytes;
    if (!dma_straight(job, dst, src, bytes, 1, 0, 0, bytes))
        dma_general(job, dst, src, bytes, 1, 0, 0, 1, 0, 0);
}

void hal_dma_wait(hal_dma_job_t *job)
{
    uint32_t ids = job->pending & ~PO_JOB_HYPER;
    if (job->pending & PO_JOB_HYPER)
        po_hyper_wait();
    if (!ids) {
        job->pending = 0;
        return;
    }
    while (PO_REG(PO_DMA_STATUS) & ids)
        ;
    PO_REG(PO_DMA_STATUS) = ids;   /* free the ids */
    job->pending = 0;
}

/* ---- memset ------------------------------------------------------------ */

/* picolibc's memset stores a byte a turn; every generated layer clears its
 * argument structs (about 150 bytes, 450 instructions that way) on each
 * call. Words here; the loop must not become a call to itself. */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    const uint32_t v = 0x01010101u * (uint8_t)c;
    for (; n && ((uintptr_t)d & 3); n--)
        *d++ = (uint8_t)c;
    for (; n >= 4; n -= 4, d += 4)
        *(uint32_t *)d = v;
    for (; n; n--)
        *d++ = (uint8_t)c;
    return dst;
}

/* ---- counting ------------------------------------------------------- */

/* mcycle is 32 bits here (GVSoC does not model mcycleh): widen it in
 * software; the harness reads it at least once per layer, far more often
 * than the 86 s (at 50 MHz) it takes to wrap. */
static HAL_L1 uint32_t counter_last, counter_high;

uint64_t hal_counter(void)
{
    uint32_t now = mcycle();
    if (now < counter_last)
        counter_high++;
    counter_last = now;
    return ((uint64_t)counter_high << 32) | now;
}

/* ---- L3: the uDMA hyperbus ------------------------------------------- */

/* Queue one transfer on channel 0 (its FIFO holds 8: wait below that). */
static void hyper_start(int cs, int read, uint32_t l2, uint32_t ext, uint32_t bytes)
{
    const uint32_t ch = PO_HYPER_CH(0);
    static HAL_L1 uint8_t hyper_on;   /* (a read and a write of the SoC's bus each time, else) */
    if (!hyper_on) {
        PO_REG(PO_UDMA_CG) |= PO_UDMA_CG_HYPER;   /* off after reset: accesses would be ignored */
        hyper_on = 1;
    }
    while (((PO_REG(ch + PO_HYPER_STATUS) >> 1) & 0xFFu) >= 6u)
        ;
    PO_REG(PO_HYPER_MEM_SEL) = (uint32_t)cs;
    /* writing a start address also picks the direction of the next transfer */
    PO_REG(ch + (read ? PO_HYPER_RX_SADDR : PO_HYPER_TX_SADDR)) = l2;
    PO_REG(ch + (read ? PO_HYPER_RX_SIZE : PO_HYPER_TX_SIZE)) = bytes;
    PO_REG(ch + PO_HYPER_EXT_ADDR) = ext;
    PO_REG(ch + PO_HYPER_CA_SETUP) = (read ? 4u : 0u) | 1u;
    PO_REG(ch + (read ? PO_HYPER_RX_CFG : PO_HYPER_TX_CFG)) = PO_HYPER_CFG_EN;
}

void po_hyper_wait(void)
{
    /* busy (bit 0) and the transfers in flight (bits 8:1) */
    while (PO_REG(PO_HYPER_CH(0) + PO_HYPER_STATUS) & 0x1FFu)
        ;
}

void po_hyper_start_read(int cs, void *l2, uint32_t ext, uint32_t bytes)
{
    hyper_start(cs, 1, (uint32_t)l2, ext, bytes);
}

static void hyper_transfer(int cs, int read, uint32_t l2, uint32_t ext, uint32_t bytes)
{
    hyper_start(cs, read, l2, ext, bytes);
    po_hyper_wait();
}

void po_hyper_read(int cs, void *l2, uint32_t ext, uint32_t bytes)
{
    hyper_transfer(cs, 1, (uint32_t)l2, ext, bytes);
}

void po_hyper_write(int cs, uint32_t ext, const void *l2, uint32_t bytes)
{
    hyper_transfer(cs, 0, (uint32_t)l2, ext, bytes);
}
