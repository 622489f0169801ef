/*
 * tessera HAL: what generated code needs from a platform, and nothing else.
 * One implementation per platform under kernels/hal/<platform>/: the host
 * (DMA is a memcpy, cores run in turn), QEMU (DMA is a copy, cores are harts),
 * GVSoC or silicon (real DMA, real cluster).
 */
#ifndef TESSERA_HAL_H
#define TESSERA_HAL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAL_MAX_DMA 4
#define HAL_MAX_CORES 16

/* ---- cores ---------------------------------------------------------- */
/* Run fn(arg) on every compute core; return when all have finished. */
void hal_fork(void (*fn)(void *), void *arg);
int hal_core_id(void);      /* 0 .. hal_num_cores() - 1 inside hal_fork */
int hal_num_cores(void);
void hal_barrier(void);     /* all compute cores of the current fork */

/* ---- DMA -------------------------------------------------------------- */
/* An asynchronous strided copy: `planes` x `rows` x `bytes`, with row and
 * plane strides on each side (3D; a 1D copy has rows = planes = 1). The
 * engine index is the target YAML's dma list index; bytes are counted per
 * engine. Several copies may be started on one job; hal_dma_wait returns
 * when all of them have landed. A zero-initialized job has nothing pending. */
typedef struct {
    uint32_t pending;
} hal_dma_job_t;

void hal_dma_start(hal_dma_job_t *job, int engine, void *dst, const void *src,
                   uint32_t bytes, uint32_t rows, uint32_t src_stride, uint32_t dst_stride,
                   uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride);
void hal_dma_wait(hal_dma_job_t *job);
#ifdef TSR_HAL_DMA_RUNS
/* Short entries for the tile loops' usual copies, on platforms that define
 * TSR_HAL_DMA_RUNS (PULP-open: between two forks core 0 pays for every
 * argument and every cold line of code, docs/gvsoc.md): hal_dma_start with
 * planes = 1, and with rows = planes = 1. tile.h picks them. */
void hal_dma_rows(hal_dma_job_t *job, int engine, void *dst, const void *src, uint32_t bytes, uint32_t rows,
                  uint32_t src_stride, uint32_t dst_stride);
void hal_dma_run(hal_dma_job_t *job, int engine, void *dst, const void *src, uint32_t bytes);
#endif
extern uint64_t hal_dma_bytes[HAL_MAX_DMA];

/* ---- storage (docs/out_of_core.md) ----------------------------------- *
 * A target with a `kind: storage` level (an SD card) is built with
 * TSR_STORAGE_WINDOW and TSR_STORAGE_BYTES: pointers in that window are not
 * memory but offsets on the card, and hal_dma_start moves them through the
 * storage driver (reads when the source is there, writes when the
 * destination is). The driver is one file per platform
 * (kernels/hal/<platform>/storage.c), the one a board port replaces. */
#ifdef TSR_STORAGE_WINDOW
/* in uintptr_t: on a 64-bit host a pointer's low 32 bits may fall in the window */
#define HAL_IN_STORAGE(p) ((uintptr_t)(p) - (uintptr_t)TSR_STORAGE_WINDOW < (uintptr_t)TSR_STORAGE_BYTES)
#define HAL_STORAGE_OFFSET(p) ((uint32_t)((uintptr_t)(p) - (uintptr_t)TSR_STORAGE_WINDOW))
#ifdef TSR_HAL_DMA_RUNS
/* hal_dma_run for a weight chunk's piece (tile.h's tsr_wstream_load): a
 * read from the storage level queued at once (PULP-open's HyperFlash) */
void hal_dma_chunk(hal_dma_job_t *job, int engine, void *dst, const void *src, uint32_t bytes);
#endif
#endif
/* Open the card (under an emulator: the image file at `path`); 0 on success. */
int hal_storage_open(const char *path);
/* Synchronous transfers; 0 on success. */
int hal_storage_read(void *dst, uint32_t offset, uint32_t bytes);
int hal_storage_write(uint32_t offset, const void *src, uint32_t bytes);
/* Asynchronous requests (the scheduler's static program, tessera/program.h):
 * queued in issue order on the card's one channel, which completes them in
 * that order; a request's number is its place in the queue (0, 1, ...).
 * hal_storage_wait_for returns once request `n` has completed. */
uint32_t hal_storage_issue(int write, uint32_t offset, void *sram, uint32_t bytes);
void hal_storage_wait_for(uint32_t n);
void hal_storage_reset_queue(void);
/* Transfers the DMA made through the driver: [0] reads, [1] writes. */
extern uint64_t hal_storage_bytes[2];
extern uint32_t hal_storage_ops[2];

/* ---- counting and console ------------------------------------------- */
/* A monotonic count (instructions or cycles, as the target's runner says). */
uint64_t hal_counter(void);
/* Optional, for platforms whose runner counts per core (the generated test
 * harness reads them only when the target says the platform has them): the
 * count inside forked functions, per compute core, and the part of
 * hal_counter() that emulated DMA copies took (zero where DMA is hardware). */
extern uint64_t hal_core_counts[HAL_MAX_CORES];
extern uint64_t hal_dma_copy_count;
extern uint32_t hal_core_count_overlaps;   /* forks whose per-core split is approximate */
/* Platform start-up before the network runs (clocks, caches, cluster). */
void hal_init(void);
/* Optional (weak: 0 where a platform has none): the deepest the main stack
 * has been since hal_init, in bytes, and its reserved size (0: not known,
 * e.g. a firmware linked by its own script); a peak equal to the size means
 * the stack reached the end of its reservation. */
uint32_t hal_stack_peak(void) __attribute__((weak));
uint32_t hal_stack_size(void) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_HAL_H */
