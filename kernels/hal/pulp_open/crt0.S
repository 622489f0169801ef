/*
 * Start-up of the PULP-open HAL. The fabric controller starts at _start (the
 * ELF entry): it prepares memory and the cluster in tsr_fc_boot and then
 * sleeps, since the cluster's core 0 runs main and ends the simulation.
 * Cluster cores start at _cluster_start (their boot address): each takes
 * its own stack at the top of L1 and enters tsr_cluster_entry(core).
 *
 * tp points every core at the one TLS block: picolibc keeps errno there,
 * and only cluster core 0 calls into the C library. gp is set on every
 * core, since the linker relaxes accesses near __global_pointer$ to it.
 */
    .section .text.start, "ax"
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    la sp, __stack
    la tp, __tls_base
    call tsr_fc_boot
1:  wfi
    j 1b
    .size _start, . - _start

    .globl _cluster_start
    .type _cluster_start, @function
    .balign 4
_cluster_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    csrr t0, mhartid
    andi t0, t0, 0x1f
    /* The stacks share ncores * __cl_stack_size bytes at the top of L1.
     * Core 0 runs main, the harness and the layer functions beneath the
     * kernels, so it takes two shares; the others split the rest evenly
     * (16-byte aligned): with 1 kB each, core 0 overflowed into core 1's
     * stack under a convolution's kernel frames. Fewer than 4 cores keep
     * equal shares. */
    la sp, __l1_stacks_top
#if TSR_NCORES >= 4
    beqz t0, 1f
    la t1, __cl_stack_size
    slli t2, t1, 1
    sub sp, sp, t2              /* below core 0's two shares */
    li t3, TSR_NCORES
    addi t3, t3, -2
    mul t1, t1, t3              /* what the other cores share */
    li t3, TSR_NCORES
    addi t3, t3, -1
    divu t1, t1, t3
    andi t1, t1, -16            /* each one's stack */
    addi t2, t0, -1
    mul t1, t2, t1
    sub sp, sp, t1
1:
#else
    la t1, __cl_stack_size
    mul t1, t0, t1
    sub sp, sp, t1
#endif
    la tp, __tls_base
    mv a0, t0
    call tsr_cluster_entry
2:  wfi
    j 2b
    .size _cluster_start, . - _cluster_start

/* mtvec: PULP cores vector every exception to its base (256-byte aligned) */
    .globl tsr_trap_vector
    .balign 256
tsr_trap_vector:
    j tsr_trap
