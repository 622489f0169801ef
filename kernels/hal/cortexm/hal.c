/*
 * HAL of Cortex-M targets run under QEMU's mps2 boards: one core, DMA is a
 * copy on the core (counted per engine, as on the host), and the counter is
 * the CMSDK APB timer 0 at 0x40000000.
 *
 * Counting: DWT CYCCNT does not count under QEMU. With -icount shift=0 QEMU
 * advances its virtual clock by 1 ns per instruction, and the board clocks
 * the CMSDK timer at 25 MHz, so the timer ticks once per 40 instructions
 * (tests/test_cortexm.py measures this). hal_counter() therefore returns
 * QEMU instruction counts with a resolution of 40 instructions, copies that
 * stand in for DMA included; they are not silicon cycles. The copies move
 * 32 bytes per ldm/stm pair (picolibc's memcpy here goes byte by byte, four
 * instructions a byte, which would bury the kernels' counts); memset is
 * the HAL's own, a word at a time, for the same reason.
 *
 * Console, argv and exit status go through picolibc's semihosting (QEMU's
 * -semihosting-config), so nothing here touches a UART.
 */
#include <string.h>

#include "tessera/hal.h"

#ifdef TSR_STORAGE_WINDOW
/* storage.c: a strided copy of which one side is on the card */
void hal_storage_dma(void *dst, const void *src, uint32_t bytes, uint32_t rows, uint32_t src_stride,
                     uint32_t dst_stride, uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride);
#endif

#ifndef TSR_NCORES
#define TSR_NCORES 1
#endif

typedef struct {
    volatile uint32_t ctrl;     /* bit 0: enable */
    volatile uint32_t value;    /* counts down, reloads from reload at 0 */
    volatile uint32_t reload;
    volatile uint32_t intstatus;
} cmsdk_timer_t;

#define TIMER0 ((cmsdk_timer_t *)0x40000000u)
#define INSTRUCTIONS_PER_TICK 40u

uint64_t hal_dma_bytes[HAL_MAX_DMA];
static uint32_t last_value;     /* timer value at the previous read */
static uint64_t ticks;          /* ticks since hal_init, wraps included */

/* The main stack's high-water mark: hal_init paints the reserved stack
 * below its own frame (tessera's linker script's .stack: __stack is its
 * top, __tsr_stack_reserved its size), hal_stack_peak finds the deepest
 * word written since. Weak: a firmware linked by its own script (export=)
 * has no such reservation, and then nothing is painted or measured. */
extern char __stack[] __attribute__((weak)), __tsr_stack_reserved[] __attribute__((weak));
#define STACK_PAINT 0x5AC3A55Cu

uint32_t hal_stack_size(void);

static uint32_t *stack_bottom(void)
{
    return (uint32_t *)(void *)(__stack - (uintptr_t)__tsr_stack_reserved);
}

static void stack_paint(void)
{
    uint32_t *p = stack_bottom(), *sp;
    if (!hal_stack_size())
        return;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (sp -= 16; p < sp; p++)     /* below this frame, with a margin */
        *p = STACK_PAINT;
}

uint32_t hal_stack_peak(void)
{
    const uint32_t *p = stack_bottom(), *top = (const uint32_t *)(void *)__stack;
    if (!hal_stack_size())
        return 0;
    while (p < top && *p == STACK_PAINT)
        p++;
    return (uint32_t)((const char *)top - (const char *)p);
}

uint32_t hal_stack_size(void)
{
    return __stack ? (uint32_t)(uintptr_t)__tsr_stack_reserved : 0;
}

void hal_init(void)
{
    stack_paint();
    TIMER0->ctrl = 0;
    TIMER0->reload = 0xFFFFFFFFu;
    TIMER0->value = 0xFFFFFFFFu;
    TIMER0->ctrl = 1;
    last_value = TIMER0->value;
    ticks = 0;
}

uint64_t hal_counter(void)
{
    uint32_t now = TIMER0->value;
    /* the timer counts down through all 2^32 values: the difference modulo
     * 2^32 is right across a wrap (one wrap is 171 G instructions) */
    ticks += (uint32_t)(last_value - now);
    last_value = now;
    return ticks * INSTRUCTIONS_PER_TICK;
}

static int current_core;

void hal_fork(void (*fn)(void *), void *arg)
{
    /* a Cortex-M target has one core; should a YAML say more, they run in
     * turn (as on the host) so every share is still computed */
    for (current_core = 0; current_core < TSR_NCORES; current_core++)
        fn(arg);
    current_core = 0;
}

int hal_core_id(void)
{
    return current_core;
}

int hal_num_cores(void)
{
    return TSR_NCORES;
}

void hal_barrier(void)
{
}

/* A copy on the core standing in for a DMA transfer. */
static void copy(uint8_t *d, const uint8_t *s, uint32_t n)
{
    if (n >= 32 && (((uintptr_t)d ^ (uintptr_t)s) & 3) == 0) {
        while ((uintptr_t)d & 3) {
            *d++ = *s++;
            n--;
        }
        for (; n >= 32; n -= 32)
            /* not r7: the Thumb frame pointer when one is kept */
            __asm__ volatile("ldmia %1!, {r2-r6, r8, r9, r12}\n\tstmia %0!, {r2-r6, r8, r9, r12}"
                             : "+r"(d), "+r"(s)
                             :
                             : "r2", "r3", "r4", "r5", "r6", "r8", "r9", "r12", "memory");
    }
    for (; n >= 4; n -= 4, d += 4, s += 4) {   /* word copies (unaligned ldr/str are fine on v7-M) */
        uint32_t w;
        memcpy(&w, s, 4);
        memcpy(d, &w, 4);
    }
    while (n--)
        *d++ = *s++;
}

/* picolibc's memset stores a byte a turn (four instructions a byte): every
 * generated layer clears its argument structs (dscnn_kws's fc: 172 bytes,
 * 690 instructions, a fifth of the layer) on each call. Two words a turn
 * here; the loop must not become a call to itself. */
typedef uint32_t __attribute__((may_alias)) hal_word_t;

__attribute__((optimize("no-tree-loop-distribute-patterns"))) void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    const uint32_t v = 0x01010101u * (uint8_t)c;
    for (; n && ((uintptr_t)d & 3); n--)
        *d++ = (uint8_t)c;
    for (; n >= 8; n -= 8, d += 8) {
        ((hal_word_t *)d)[0] = v;
        ((hal_word_t *)d)[1] = v;
    }
    if (n >= 4) {
        *(hal_word_t *)d = v;
        d += 4;
        n -= 4;
    }
    for (; n; n--)
        *d++ = (uint8_t)c;
    return dst;
}

void hal_dma_start(hal_dma_job_t *job, int engine, void *dst, const void *src,
                   uint32_t bytes, uint32_t rows, uint32_t src_stride, uint32_t dst_stride,
                   uint32_t planes, uint32_t src_plane_stride, uint32_t dst_plane_stride)
{
    uint32_t p, r;
#ifdef TSR_STORAGE_WINDOW
    if (HAL_IN_STORAGE(src) || HAL_IN_STORAGE(dst)) {
        hal_storage_dma(dst, src, bytes, rows, src_stride, dst_stride, planes, src_plane_stride,
                        dst_plane_stride);
        hal_dma_bytes[engine] += (uint64_t)bytes * rows * planes;
        job->pending = 0;
        return;
    }
#endif
    for (p = 0; p < planes; p++) {
        uint8_t *d = (uint8_t *)dst + p * dst_plane_stride;
        const uint8_t *s = (const uint8_t *)src + p * src_plane_stride;
        for (r = 0; r < rows; r++)
            copy(d + r * dst_stride, s + r * src_stride, bytes);
    }
    hal_dma_bytes[engine] += (uint64_t)bytes * rows * planes;
    job->pending = 0;
}

void hal_dma_wait(hal_dma_job_t *job)
{
    (void)job;
}
