/*
 * The PULP-open chip as GVSoC simulates it (gvsoc/gvsoc, pulp-open target):
 * the few registers tessera's bare-metal HAL touches. Addresses and fields
 * were read off GVSoC's chip description and peripheral models and checked
 * on the simulator; see docs/gvsoc.md.
 */
#ifndef TESSERA_PULP_OPEN_H
#define TESSERA_PULP_OPEN_H

#include <stdint.h>

#define PO_REG(addr) (*(volatile uint32_t *)(addr))
/* the HAL's variables in L1 (memory.L1.reserved.hal; from the cluster a
 * variable in L2 costs about 15 cycles an access) */
#define HAL_L1 __attribute__((section(".tsr_hal.vars")))

/* ---- SoC (fabric controller side) ------------------------------------ */
/* APB SoC control CORESTATUS: bit 31 ends the simulation, bits 30:0 are
 * its exit status */
#define PO_SOC_CORESTATUS 0x1A1040A0u
#define PO_SOC_EOC 0x80000000u
/* GVSoC's stdout peripheral: one byte register per core, at
 * base + (cluster << 7) + (core << 3); the fabric controller is cluster 31 */
#define PO_STDOUT_BASE 0x1A10F000u
#define PO_STDOUT(cluster, core) (PO_STDOUT_BASE + ((uint32_t)(cluster) << 7) + ((uint32_t)(core) << 3))
#define PO_FC_ICACHE_ENABLE 0x1A108800u

/* ---- cluster, global view (reachable from the fabric controller) ------ */
#define PO_L1_BASE 0x10000000u
#define PO_L1_SIZE 0x00010000u
#define PO_CL_FETCH_ENABLE 0x10200008u      /* one bit per core, rising edge starts it */
#define PO_CL_BOOT_ADDR(i) (0x10200040u + 4u * (uint32_t)(i))
#define PO_CL_ICACHE_ENABLE 0x10201400u
#define PO_CL_MAX_CORES 8

/* ---- cluster, per-core view (each core reaches its own event unit and
 * DMA channel here; the global view of the barriers is not modelled) ---- */
#define PO_EU 0x10204000u
#define PO_EU_CORE_MASK (PO_EU + 0x00u)          /* events that wake this core */
#define PO_EU_BARRIER(id) (PO_EU + 0x200u + 0x20u * (uint32_t)(id))
#define PO_EU_BARRIER_TRIGGER_MASK 0x00u         /* cores that take part */
#define PO_EU_BARRIER_TARGET_MASK 0x0Cu          /* cores woken when all arrived */
#define PO_EU_BARRIER_WAIT_CLEAR 0x1Cu           /* read: arrive, sleep, clear the event */
#define PO_EU_BARRIER_EVENT 16

/* mchan cluster DMA: read CMD to get a transfer id (its counter collects
 * every command pushed after it), push {cmd, L1 address, L2 address[,
 * row length, L2 row stride]}; STATUS bit id stays set while bytes of
 * that id are in flight; writing the bit back frees the id. */
#define PO_DMA 0x10204400u
#define PO_DMA_CMD (PO_DMA + 0x0u)
#define PO_DMA_STATUS (PO_DMA + 0x4u)
#define PO_DMA_LEN_MAX 0x1FFFFu                 /* 17-bit length field */
#define PO_DMA_TO_L1 (1u << 17)                 /* direction: L2 -> L1 */
#define PO_DMA_INC (1u << 18)                   /* incrementing addresses */
#define PO_DMA_2D_EXT (1u << 19)                /* rows on the L2 side */
#define PO_DMA_IDS 16

static inline uint32_t po_hartid(void)
{
    uint32_t id;
    __asm__ volatile("csrr %0, mhartid" : "=r"(id));
    return id;
}

/* mhartid: cluster in bits 10:5, core in bits 4:0 */
static inline uint32_t po_cluster_id(void)
{
    return (po_hartid() >> 5) & 0x3Fu;
}

static inline uint32_t po_core_id(void)
{
    return po_hartid() & 0x1Fu;
}

/* ---- uDMA hyperbus (L3), version 3 as GVSoC's udma_hyper_v3 models it ----
 * The uDMA's peripherals sit 0x80 apart from base + 0x80; the hyperbus is
 * periph ids 8-16: eight transfer channels (0x80 apart) and then the common
 * registers. Chip select 0 is the board's 8 MB HyperRAM, 1 its 64 MB
 * HyperFlash (which GVSoC preloads from the runner's flash image). The uDMA
 * moves L2 <-> external memory only; checked on GVSoC, docs/gvsoc.md. */
#define PO_UDMA 0x1A102000u
#define PO_UDMA_CG (PO_UDMA + 0x0u)             /* clock gate, one bit per periph id */
#define PO_UDMA_CG_HYPER 0x1FF00u               /* ids 8-16 */
#define PO_HYPER_CH(i) (PO_UDMA + 0x80u + 8u * 0x80u + 0x80u * (uint32_t)(i))
#define PO_HYPER_COMMON PO_HYPER_CH(8)
#define PO_HYPER_MEM_SEL (PO_HYPER_COMMON + 0x20u)  /* chip select of the next transfers */
#define PO_HYPER_RX_SADDR 0x00u                 /* per channel: L2 address (read) */
#define PO_HYPER_RX_SIZE 0x04u
#define PO_HYPER_RX_CFG 0x08u                   /* writing EN starts the read */
#define PO_HYPER_TX_SADDR 0x0Cu                 /* L2 address (write) */
#define PO_HYPER_TX_SIZE 0x10u
#define PO_HYPER_TX_CFG 0x14u
#define PO_HYPER_CA_SETUP 0x18u                 /* bit 2 read, bit 1 register space, bit 0 linear burst */
#define PO_HYPER_EXT_ADDR 0x1Cu                 /* byte address in the external memory */
#define PO_HYPER_STATUS 0x24u                   /* bit 0 busy */
#define PO_HYPER_CFG_EN (1u << 4)
#define PO_HYPER_CS_RAM 0
#define PO_HYPER_CS_FLASH 1

/* Blocking transfers between L2 and the HyperRAM or HyperFlash (cs), on
 * hyperbus channel 0; bytes > 0, any alignment. */
void po_hyper_read(int cs, void *l2, uint32_t ext, uint32_t bytes);
void po_hyper_write(int cs, uint32_t ext, const void *l2, uint32_t bytes);
/* Queue a read and return; po_hyper_wait waits for every queued transfer.
 * A DMA job with uDMA reads in it carries PO_JOB_HYPER (mchan ids are 0-15). */
void po_hyper_start_read(int cs, void *l2, uint32_t ext, uint32_t bytes);
void po_hyper_wait(void);
#define PO_JOB_HYPER (1u << 31)

#endif /* TESSERA_PULP_OPEN_H */
