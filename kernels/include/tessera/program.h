/*
 * The out-of-core program (docs/out_of_core.md): the IO/compute schedule
 * tessera.storage chose at build time, as a table of ops the firmware
 * executes in order. READ and WRITE queue a transfer on the card's channel
 * (hal_storage_issue) and the core goes on; WAIT blocks until a transfer
 * has completed; COMPUTE is a tile of a layer, whose reads sit in the tile
 * pools at the offsets the scheduler chose. The generated layers ask for
 * their tiles in order (tsr_prog_compute): the interpreter runs every op
 * before that tile's COMPUTE, so the next layer's first reads go out while
 * this layer computes, exactly where the program put them.
 *
 * The generated program.c defines tsr_program (no ops: the build chose the
 * in-order firmware) and, with TSR_PROGRAM_IMPL, compiles the interpreter.
 */
#ifndef TESSERA_PROGRAM_H
#define TESSERA_PROGRAM_H

#include <stdint.h>

#include "tessera/hal.h"

enum { TSR_OP_READ, TSR_OP_WRITE, TSR_OP_WAIT, TSR_OP_COMPUTE };
enum { TSR_POOL_IN, TSR_POOL_W, TSR_POOL_OUT };
/* what a read holds, for the tile's loader: input i (< TSR_KIND_WEIGHTS),
 * the weights, or parameter array p (TSR_KIND_PARAM + p) */
#define TSR_KIND_WEIGHTS 8
#define TSR_KIND_PARAM 9
#define TSR_KINDS 16

typedef struct {
    uint8_t op;         /* TSR_OP_* */
    uint8_t pool;       /* READ: TSR_POOL_IN or TSR_POOL_W; COMPUTE: tiles in the run (0: 1), a to a + pool - 1,
                         * consecutive, with the same reads and output buffer */
    uint16_t layer;     /* COMPUTE */
    uint32_t a;         /* READ: pool offset; WRITE: out pool offset; WAIT: request; COMPUTE: tile */
    uint32_t b;         /* READ, WRITE: card offset; COMPUTE: first read ref */
    uint32_t n;         /* READ, WRITE: bytes; COMPUTE: read refs */
    uint32_t c;         /* COMPUTE: output offset in the out pool */
} tsr_op_t;

typedef struct {        /* one read a COMPUTE uses, in the tile's order */
    uint8_t pool;
    uint8_t kind;       /* TSR_KIND_* */
    uint16_t advance;   /* p > 0: tile k of a COMPUTE run finds it at buf + (k / p) * bytes, 0: at buf */
    uint32_t buf;       /* pool offset */
    uint32_t bytes;
} tsr_ref_t;

typedef struct {
    const tsr_op_t *ops;
    uint32_t n_ops;
    const tsr_ref_t *refs;
    const uint16_t *layer_tiles;    /* computes per layer */
    const uint8_t *layer_level;     /* 1: the run loop steps the layer's computes (whole or fused layers) */
    int8_t *pool[3];
} tsr_program_t;

extern const tsr_program_t tsr_program;
/* ops executed by kind (TSR_OP_*), and bytes read and written by the program */
extern uint32_t tsr_prog_counts[4];
extern uint64_t tsr_prog_bytes[2];

void tsr_prog_begin(void);
/* Runs the ops up to tile `tile` of layer `layer`'s COMPUTE (which must be
 * the next one: else the firmware stops) and returns it; 0 without a program. */
const tsr_op_t *tsr_prog_compute(uint32_t layer, uint32_t tile);
/* Before layer `layer` runs: steps its computes when the run loop owns them. */
void tsr_prog_layer(uint32_t layer);
/* Copies a tile's reads from the pools to its L1 buffers, dst[kind] (each
 * kind's reads back to back: the compact box, weights and parameter rows);
 * weights and parameters only with `weights`; none of a kind without dst. */
void tsr_prog_gather(const tsr_op_t *c, int8_t *const dst[TSR_KINDS], int weights, int engine);
/* Where the tile's first read of `kind` sits in its pool (a band of rows
 * the tile cuts its box from), or 0. */
const int8_t *tsr_prog_ref(const tsr_op_t *c, int kind);
/* The ops after the last COMPUTE (the last writes and their waits). */
void tsr_prog_end(void);

#ifdef TSR_PROGRAM_IMPL
#include <stdio.h>
#include <stdlib.h>

uint32_t tsr_prog_counts[4];
uint64_t tsr_prog_bytes[2];
static uint32_t pc, served;     /* the next op; tiles of its COMPUTE run served */
static uint32_t current;        /* the run's tile the last tsr_prog_compute returned */

static const int8_t *ref_at(const tsr_ref_t *r)
{
#ifdef TSR_PROG_PERIODS
    /* program.c has runs whose reads advance every `advance` tiles (a band's
       channel tiles, each over the band's columns) */
    return tsr_program.pool[r->pool] + r->buf + (r->advance ? current / r->advance * r->bytes : 0);
#else
    return tsr_program.pool[r->pool] + r->buf + (r->advance ? current * r->bytes : 0);
#endif
}

void tsr_prog_begin(void)
{
    pc = 0;
    served = 0;
    hal_storage_reset_queue();
}

static void step(const tsr_op_t *o)
{
    tsr_prog_counts[o->op]++;
    if (o->op == TSR_OP_READ) {
        hal_storage_issue(0, o->b, tsr_program.pool[o->pool] + o->a, o->n);
        tsr_prog_bytes[0] += o->n;
    } else if (o->op == TSR_OP_WRITE) {
        hal_storage_issue(1, o->b, tsr_program.pool[TSR_POOL_OUT] + o->a, o->n);
        tsr_prog_bytes[1] += o->n;
    } else {
        hal_storage_wait_for(o->a);
    }
}

const tsr_op_t *tsr_prog_compute(uint32_t layer, uint32_t tile)
{
    const tsr_op_t *o;
    if (tsr_program.n_ops == 0)
        return 0;
    while (pc < tsr_program.n_ops && tsr_program.ops[pc].op != TSR_OP_COMPUTE)
        step(&tsr_program.ops[pc++]);
    o = &tsr_program.ops[pc];
    if (pc == tsr_program.n_ops || o->layer != layer || o->a + served != tile) {
        fprintf(stderr, "tessera program: layer %lu tile %lu is not the program's next compute (op %lu)\n",
                (unsigned long)layer, (unsigned long)tile, (unsigned long)pc);
        exit(4);
    }
    tsr_prog_counts[TSR_OP_COMPUTE]++;
    current = served;
    if (++served >= (o->pool ? o->pool : 1u)) {
        served = 0;
        pc++;
    }
    return o;
}

void tsr_prog_layer(uint32_t layer)
{
    uint32_t t;
    if (tsr_program.n_ops == 0 || !tsr_program.layer_level[layer])
        return;
    for (t = 0; t < tsr_program.layer_tiles[layer]; t++)
        tsr_prog_compute(layer, t);
}

void tsr_prog_gather(const tsr_op_t *c, int8_t *const dst[TSR_KINDS], int weights, int engine)
{
    uint32_t at[TSR_KINDS] = {0};
    hal_dma_job_t job = {0};
    uint32_t i;
    for (i = c->b; i < c->b + c->n; i++) {
        const tsr_ref_t *r = &tsr_program.refs[i];
        if ((r->kind >= TSR_KIND_WEIGHTS && !weights) || !dst[r->kind])
            continue;       /* a band (no dst) is cut from the pool by the layer: tsr_prog_ref */
        hal_dma_start(&job, engine, dst[r->kind] + at[r->kind], ref_at(r), r->bytes,
                      1, 0, 0, 1, 0, 0);
        at[r->kind] += r->bytes;
    }
    hal_dma_wait(&job);
}

const int8_t *tsr_prog_ref(const tsr_op_t *c, int kind)
{
    uint32_t i;
    for (i = c->b; i < c->b + c->n; i++)
        if (tsr_program.refs[i].kind == kind)
            return ref_at(&tsr_program.refs[i]);
    return 0;
}

void tsr_prog_end(void)
{
    while (pc < tsr_program.n_ops) {
        if (tsr_program.ops[pc].op == TSR_OP_COMPUTE) {
            fprintf(stderr, "tessera program: layer %u tile %lu never ran\n", tsr_program.ops[pc].layer,
                    (unsigned long)tsr_program.ops[pc].a);
            exit(4);
        }
        step(&tsr_program.ops[pc++]);
    }
}
#endif /* TSR_PROGRAM_IMPL */

#endif /* TESSERA_PROGRAM_H */
