/*
 * Start-up of the qemu_virt_rv32 platform (QEMU's RV32 `virt` machine,
 * -smp 9): hart 0 is the fabric controller, harts 1..8 the cluster cores.
 *
 * QEMU starts every hart at the ELF entry at once. Hart 0 goes on to
 * picolibc's crt0 (_start: stack __stack, .data/.bss, main, exit through
 * semihosting). Every other hart takes its own stack below the fabric
 * controller's (harts past TSR_NCORES, the target's core count, park
 * without one) and waits in hal_cluster_main for work from hal_fork; it
 * touches no .data/.bss that hart 0's start-up rewrites before then (the
 * fork state is zero before and after .bss is cleared).
 *
 * Linker-script symbols (see the platform's linker script):
 *   __tsr_cluster_stacks_top   top of the cluster harts' stacks
 *   __tsr_cluster_stack_size   bytes of stack per cluster hart
 */
#ifndef TSR_NCORES
#error "TSR_NCORES (the cluster's core count) must be defined"
#endif

    .section .text.tsr.entry, "ax"
    .globl _tsr_entry
    .type _tsr_entry, @function
_tsr_entry:
    csrr t0, mhartid
    bnez t0, 1f
    j _start                        /* the fabric controller: picolibc's crt0 */
1:
    li t1, TSR_NCORES
    bleu t0, t1, 2f
    csrw mie, zero                  /* a hart the target does not use: it has no */
9:  wfi                             /* stack, touches nothing and never wakes */
    j 9b
2:
.option push
.option norelax
    la gp, __global_pointer$
.option pop
    la tp, __tls_base               /* nothing on a cluster hart uses TLS; keep tp sane */
    la sp, __tsr_cluster_stacks_top
    lui t1, %hi(__tsr_cluster_stack_size)
    addi t1, t1, %lo(__tsr_cluster_stack_size)
    addi t2, t0, -1
    mul t1, t1, t2
    sub sp, sp, t1                  /* hart h: top - (h - 1) * size */
    la t1, hal_trap_entry
    csrw mtvec, t1
    mv a0, t0
    call hal_cluster_main           /* never returns */
3:  wfi
    j 3b
    .size _tsr_entry, . - _tsr_entry

/* A cluster hart that faults reports it and ends the run (mtvec is direct
 * mode: 4-byte aligned). */
    .section .text.tsr.trap, "ax"
    .balign 4
    .globl hal_trap_entry
hal_trap_entry:
    csrr a0, mhartid
    csrr a1, mcause
    csrr a2, mepc
    csrr a3, mtval
    call hal_fault                  /* never returns */
4:  j 4b
