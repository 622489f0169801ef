/*
 * Xpulpv2 instructions for Debian's GCC, which has no Xpulp mnemonics: its
 * assembler emits any encoding with `.insn`. The encodings are those of
 * GVSoC's pulp-open cores (its isa_pulpv2 description), checked on GVSoC.
 * Only compiled when the target YAML's toolchain.isa lists xpulpv2 (the
 * build then defines TSR_ISA_XPULPV2); QEMU executes none of these.
 *
 *   pv.sdotsp.b  rd += dot(4 x int8 of rs1, 4 x int8 of rs2)
 *   pv.sdotusp.b rd += dot(4 x uint8 of rs1, 4 x int8 of rs2)
 *   p.lw rd, 4(rs1!)   load a word, then rs1 += 4
 *   p.mac rd, rs1, rs2 rd += rs1 * rs2
 *   lp.setup 0, rs1, end   hardware loop 0: rs1 turns of the instructions
 *                      from the next one to `end` (its last instruction),
 *                      encoded as (end - pc) / 2
 *
 * `.insn` takes no forward reference, so a loop's length is counted by hand
 * (XP_LOOP's `n`, instructions in the body) and the assembler checks the
 * count once the body is behind it (XP_LOOP_END); `.option norvc norelax`
 * keeps every instruction 4 bytes and the distance fixed.
 *
 * The loops below are whole asm blocks (a hardware loop cannot be left to
 * a compiler that does not know about it).
 */
#ifndef TESSERA_PNN_XPULP_H
#define TESSERA_PNN_XPULP_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/kernels.h"

#define XP_SDOTSP(rd, rs1, rs2) ".insn r 0x57, 1, 0x5C, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_SDOTUSP(rd, rs1, rs2) ".insn r 0x57, 1, 0x54, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_LW_INC(rd, rs1) ".insn i 0x0B, 2, " rd ", 4(" rs1 ")\n\t"
/* register post-increment loads and stores: p.lbu rd, rs2(rs1!), p.lw
 * rd, rs2(rs1!), p.sb rs2, 1(rs1!), p.sb rs2, rs3(rs1!) */
#define XP_LBU_RR_INC(rd, rs1, rs2) ".insn r 0x0B, 7, 0x20, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_LW_RR_INC(rd, rs1, rs2) ".insn r 0x0B, 7, 0x10, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_SB_INC1(rs2, rs1) ".insn s 0x2B, 0, " rs2 ", 1(" rs1 ")\n\t"
#define XP_SB_RR_INC(rs2, rs1, rs3) ".insn r 0x2B, 4, 0, " rs3 ", " rs1 ", " rs2 "\n\t"
/* p.sw rs2, 4(rs1!) */
#define XP_SW_INC4(rs2, rs1) ".insn s 0x2B, 2, " rs2 ", 4(" rs1 ")\n\t"
/* p.sw rs2, rs3(rs1!) */
#define XP_SW_RR_INC(rs2, rs1, rs3) ".insn r 0x2B, 6, 0, " rs3 ", " rs1 ", " rs2 "\n\t"
/* p.sh rs2, rs3(rs1!) */
#define XP_SH_RR_INC(rs2, rs1, rs3) ".insn r 0x2B, 5, 0, " rs3 ", " rs1 ", " rs2 "\n\t"
/* p.lb rd, 1(rs1!): a signed byte, then rs1 += 1; p.lbu rd, rs2(rs1): the
 * unsigned byte at rs1 + rs2 (no increment) */
#define XP_LB_INC1(rd, rs1) ".insn i 0x0B, 0, " rd ", 1(" rs1 ")\n\t"
#define XP_LBU_RR(rd, rs1, rs2) ".insn r 0x03, 7, 0x20, " rd ", " rs1 ", " rs2 "\n\t"
/* pv.max.b, pv.min.b: four signed bytes at once */
#define XP_MAX4(rd, rs1, rs2) ".insn r 0x57, 1, 0x18, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_MIN4(rd, rs1, rs2) ".insn r 0x57, 1, 0x10, " rd ", " rs1 ", " rs2 "\n\t"
/* p.addRN rd, rs1, rs2: rd = (rd + rs1 + 2^(rs2 - 1)) >> rs2 (32-bit sum, arithmetic shift, rs2 > 0) */
#define XP_ADDRN(rd, rs1, rs2) ".insn r 0x5B, 6, 0x20, " rd ", " rs1 ", " rs2 "\n\t"
/* p.clipi rd, rs1, 8: clamp to [-128, 127] (the immediate sits in the rs2 field: x8 is 8) */
#define XP_CLIP8(rd) ".insn r 0x33, 1, 0x0A, " rd ", " rd ", x8\n\t"
/* p.mac rd, rs1, rs2: rd += rs1 * rs2 */
#define XP_MAC(rd, rs1, rs2) ".insn r 0x33, 0, 0x21, " rd ", " rs1 ", " rs2 "\n\t"
/* p.max, p.min (signed) */
#define XP_MAX(rd, rs1, rs2) ".insn r 0x33, 6, 0x02, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_MIN(rd, rs1, rs2) ".insn r 0x33, 4, 0x02, " rd ", " rs1 ", " rs2 "\n\t"
/* pv.packlo.b rd, rs1, rs2: bytes 1, 0 of rd = rs1, rs2 (bytes 3, 2 kept); pv.packhi.b: bytes 3, 2 */
#define XP_PACKLO(rd, rs1, rs2) ".insn r 0x57, 1, 0x70, " rd ", " rs1 ", " rs2 "\n\t"
#define XP_PACKHI(rd, rs1, rs2) ".insn r 0x57, 1, 0x6C, " rd ", " rs1 ", " rs2 "\n\t"
/* lp.setup 0, rs1 over the next n instructions; XP_LOOP_END() goes right
 * before the last of them, XP_LOOP_CHECK(n) after it */
#define XP_STR(x) #x
#define XP_XSTR(x) XP_STR(x)   /* x macro-expanded first */
#define XP_LOOP(rs1, n) \
    ".option push\n\t.option norvc\n\t.option norelax\n\t.Lxp_set%=:\n\t" \
    ".insn i 0x7B, 4, x0, " rs1 ", " XP_STR(2 * n) "\n\t"
#define XP_LOOP_END() ".Lxp_end%=:\n\t"
#define XP_LOOP_CHECK(n) \
    ".if .Lxp_end%= - .Lxp_set%= != 4 * " XP_STR(n) "\n\t.error \"hardware loop length\"\n\t.endif\n\t" \
    ".option pop"

/* acc += x * y in one p.mac */
static inline int32_t xp_mac(int32_t acc, int32_t x, int32_t y)
{
    __asm__(".insn r 0x33, 0, 0x21, %0, %1, %2" : "+r"(acc) : "r"(x), "r"(y));
    return acc;
}

/* rd = min(rs1, rs2), max (signed): p.min, p.max */
static inline int32_t xp_min(int32_t a, int32_t b)
{
    int32_t r;
    __asm__(".insn r 0x33, 4, 0x02, %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline int32_t xp_max(int32_t a, int32_t b)
{
    int32_t r;
    __asm__(".insn r 0x33, 6, 0x02, %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* acc + dot(4 x int8 of x, 4 x int8 of w): pv.sdotsp.b */
static inline int32_t xp_sdotsp(int32_t acc, uint32_t x, uint32_t w)
{
    __asm__(".insn r 0x57, 1, 0x5C, %0, %1, %2" : "+r"(acc) : "r"(x), "r"(w));
    return acc;
}

/* The word at p, whatever its alignment (the pulp-open cores handle
 * misaligned loads; C would need four byte loads). */
static inline uint32_t xp_lw(const int8_t *p)
{
    uint32_t v;
    __asm__("lw %0, %1" : "=r"(v) : "m"(*(const struct { int8_t b[4]; } *)p));
    return v;
}

/* n bytes, src stepping by `step`, to dst: two instructions per byte, two
 * bytes per turn (a store right after its load would stall a cycle) */
static inline void xp_gather(int8_t *dst, const int8_t *src, int32_t step, int32_t n)
{
    const int32_t pairs = n >> 1;
    if (pairs > 0)
        __asm__ volatile(XP_LOOP("%[n]", 4) XP_LBU_RR_INC("t0", "%[s]", "%[k]") XP_LBU_RR_INC("t1", "%[s]", "%[k]")
                         XP_SB_INC1("t0", "%[d]") XP_LOOP_END() XP_SB_INC1("t1", "%[d]") XP_LOOP_CHECK(4)
                         : [s] "+r"(src), [d] "+r"(dst)
                         : [n] "r"(pairs), [k] "r"(step)
                         : "t0", "t1", "memory");
    if (n & 1)
        *dst = *src;
}

/* Store a word at p, whatever its alignment (as xp_lw loads). */
static inline void xp_sw(int8_t *p, uint32_t v)
{
    __asm__("sw %1, %0" : "=m"(*(struct { int8_t b[4]; } *)p) : "r"(v));
}

/* The body of a 4 channel x 2 pixel block, four k per turn: `DOT` is
 * sdotsp (signed inputs) or sdotusp (inputs flipped to unsigned by the xor
 * with 0x80808080 in t4: x + 128 for int8 x is x ^ 0x80 read as uint8).
 * Six post-increment loads and eight dot products (32 MACs) per turn. The
 * loaded words live in fixed temporaries (t0-t3), clobbered: GCC allows 30
 * asm operands and the accumulators and pointers take 29. */
#define XP_FLIP_SETUP "li t4, 0x80808080\n\t"
#define XP_FLIP2 "xor t0, t0, t4\n\txor t1, t1, t4\n\t"
#define XP_FLIP1 "xor t0, t0, t4\n\t"
/* instructions in the loop bodies: 6 loads + 8 dots (+ 2 xor), 5 + 4 (+ 1) */
#define XP_LEN_4X2 14
#define XP_LEN_4X2_FLIP 16
#define XP_LEN_4X1 9
#define XP_LEN_4X1_FLIP 10

#define XP_BLOCK_4X2(DOT, SETUP, XOR, LEN)                                               \
    __asm__ volatile(SETUP XP_LOOP("%[n]", LEN)                                           \
                     XP_LW_INC("t0", "%[p0]") XP_LW_INC("t1", "%[p1]")                    \
                     XP_LW_INC("t2", "%[q0]") XP_LW_INC("t3", "%[q1]")                    \
                     XOR                                                                   \
                     DOT("%[a00]", "t0", "t2") DOT("%[a01]", "t1", "t2")                  \
                     XP_LW_INC("t2", "%[q2]")                                             \
                     DOT("%[a10]", "t0", "t3") DOT("%[a11]", "t1", "t3")                  \
                     XP_LW_INC("t3", "%[q3]")                                             \
                     DOT("%[a20]", "t0", "t2") DOT("%[a21]", "t1", "t2")                  \
                     DOT("%[a30]", "t0", "t3")                                            \
                     XP_LOOP_END() DOT("%[a31]", "t1", "t3")                              \
                     XP_LOOP_CHECK(LEN)                                                   \
                     : [a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), \
                       [a20] "+r"(a20), [a21] "+r"(a21), [a30] "+r"(a30), [a31] "+r"(a31), \
                       [p0] "+r"(p0), [p1] "+r"(p1), [q0] "+r"(q0), [q1] "+r"(q1),        \
                       [q2] "+r"(q2), [q3] "+r"(q3)                                       \
                     : [n] "r"(n)                                                         \
                     : "t0", "t1", "t2", "t3", "t4", "memory")

/* 4 channels x 1 pixel: five loads and four dot products (16 MACs). */
#define XP_BLOCK_4X1(DOT, SETUP, XOR, LEN)                                               \
    __asm__ volatile(SETUP XP_LOOP("%[n]", LEN)                                           \
                     XP_LW_INC("t0", "%[p0]")                                             \
                     XP_LW_INC("t2", "%[q0]") XP_LW_INC("t3", "%[q1]")                    \
                     XOR                                                                   \
                     DOT("%[a00]", "t0", "t2")                                            \
                     XP_LW_INC("t2", "%[q2]")                                             \
                     DOT("%[a10]", "t0", "t3")                                            \
                     XP_LW_INC("t3", "%[q3]")                                             \
                     DOT("%[a20]", "t0", "t2")                                            \
                     XP_LOOP_END() DOT("%[a30]", "t0", "t3")                              \
                     XP_LOOP_CHECK(LEN)                                                   \
                     : [a00] "+r"(a00), [a10] "+r"(a10), [a20] "+r"(a20), [a30] "+r"(a30), \
                       [p0] "+r"(p0), [q0] "+r"(q0), [q1] "+r"(q1), [q2] "+r"(q2),        \
                       [q3] "+r"(q3)                                                      \
                     : [n] "r"(n)                                                         \
                     : "t0", "t2", "t3", "t4", "memory")

/*
 * Pieces of the 4 channel x 2 pixel asm blocks with the requantization in
 * registers (pointwise and convolution, matmul_xpulp.c and conv.c): the
 * accumulators are s2..s9 (channel j of pixel 0 in s(2 + 2j), of pixel 1
 * in s(3 + 2j)), t0..t3 the loaded words.
 *
 * XP_K4X2: one turn of the K loop (14 instructions): four bytes of each
 * pixel's row (p0, p1) against four of each channel's (q0..q3), all
 * post-incremented.
 */
#define XP_K4X2(p0, p1, q0, q1, q2, q3)                                                              \
    XP_LW_INC("t0", p0) XP_LW_INC("t1", p1) XP_LW_INC("t2", q0) XP_LW_INC("t3", q1)                \
    XP_SDOTSP("s2", "t0", "t2") XP_SDOTSP("s3", "t1", "t2") XP_LW_INC("t2", q2)                     \
    XP_SDOTSP("s4", "t0", "t3") XP_SDOTSP("s5", "t1", "t3") XP_LW_INC("t3", q3)                     \
    XP_SDOTSP("s6", "t0", "t2") XP_SDOTSP("s7", "t1", "t2") XP_SDOTSP("s8", "t0", "t3")             \
    XP_SDOTSP("s9", "t1", "t3")

/* The block's record (xp_rec4_t, rq32.h) at `rec`: mulh, p.addRN with the
 * zero point folded, channel by channel (28 instructions; s10, s11, t2,
 * t3, t5, t6 are free by then) */
#define XP_RQ8(rec)                                                                                  \
    "lw s10, 16(" rec ")\n\tlw s11, 20(" rec ")\n\tlw t5, 24(" rec ")\n\t"                         \
    "lw t6, 28(" rec ")\n\tlw t2, 32(" rec ")\n\tlw t3, 36(" rec ")\n\t"                           \
    "mulh s2, s2, s10\n\tmulh s3, s3, s10\n\t" XP_ADDRN("s2", "t5", "s11") XP_ADDRN("s3", "t5", "s11") \
    "mulh s4, s4, t6\n\tmulh s5, s5, t6\n\t" XP_ADDRN("s4", "t3", "t2") XP_ADDRN("s5", "t3", "t2")     \
    "lw s10, 40(" rec ")\n\tlw s11, 44(" rec ")\n\tlw t5, 48(" rec ")\n\t"                         \
    "lw t6, 52(" rec ")\n\tlw t2, 56(" rec ")\n\tlw t3, 60(" rec ")\n\t"                           \
    "mulh s6, s6, s10\n\tmulh s7, s7, s10\n\t" XP_ADDRN("s6", "t5", "s11") XP_ADDRN("s7", "t5", "s11") \
    "mulh s8, s8, t6\n\tmulh s9, s9, t6\n\t" XP_ADDRN("s8", "t3", "t2") XP_ADDRN("s9", "t3", "t2")
/* the same for one pixel: accumulators s2, s4, s6, s8 (20 instructions) */
#define XP_RQ4(rec)                                                                                  \
    "lw s10, 16(" rec ")\n\tlw s11, 20(" rec ")\n\tlw t5, 24(" rec ")\n\t"                         \
    "lw t6, 28(" rec ")\n\tlw t2, 32(" rec ")\n\tlw t3, 36(" rec ")\n\t"                           \
    "mulh s2, s2, s10\n\t" XP_ADDRN("s2", "t5", "s11") "mulh s4, s4, t6\n\t" XP_ADDRN("s4", "t3", "t2") \
    "lw s10, 40(" rec ")\n\tlw s11, 44(" rec ")\n\tlw t5, 48(" rec ")\n\t"                         \
    "lw t6, 52(" rec ")\n\tlw t2, 56(" rec ")\n\tlw t3, 60(" rec ")\n\t"                           \
    "mulh s6, s6, s10\n\t" XP_ADDRN("s6", "t5", "s11") "mulh s8, s8, t6\n\t" XP_ADDRN("s8", "t3", "t2")
#define XP_CLIP8X4 XP_CLIP8("s2") XP_CLIP8("s4") XP_CLIP8("s6") XP_CLIP8("s8")
#define XP_CLIP8X4_LEN 4
#define XP_MINMAX4(rec) "lw t2, 64(" rec ")\n\tlw t3, 68(" rec ")\n\t" XP_MINMAX1("s2") XP_MINMAX1("s4")     \
    XP_MINMAX1("s6") XP_MINMAX1("s8")
#define XP_MINMAX4_LEN 10
/* the clamp: the whole int8 range (p.clipi), or the record's lo and hi */
#define XP_CLIP8X8 XP_CLIP8("s2") XP_CLIP8("s3") XP_CLIP8("s4") XP_CLIP8("s5") XP_CLIP8("s6") XP_CLIP8("s7") \
    XP_CLIP8("s8") XP_CLIP8("s9")
#define XP_CLIP8X8_LEN 8
#define XP_MINMAX1(r) XP_MAX(r, r, "t2") XP_MIN(r, r, "t3")
#define XP_MINMAX8(rec) "lw t2, 64(" rec ")\n\tlw t3, 68(" rec ")\n\t" XP_MINMAX1("s2") XP_MINMAX1("s3")     \
    XP_MINMAX1("s4") XP_MINMAX1("s5") XP_MINMAX1("s6") XP_MINMAX1("s7") XP_MINMAX1("s8") XP_MINMAX1("s9")
#define XP_MINMAX8_LEN 18
/* pixel 0's four bytes into t0, pixel 1's into t1 (4 instructions) */
#define XP_PACK8 XP_PACKLO("t0", "s4", "s2") XP_PACKHI("t0", "s8", "s6") XP_PACKLO("t1", "s5", "s3")     \
    XP_PACKHI("t1", "s9", "s7")

/* channel j's two pixels into the low halfword of t(j): a channel-major
 * store's halfwords (4 instructions) */
#define XP_PACK8_CHW XP_PACKLO("t0", "s3", "s2") XP_PACKLO("t1", "s5", "s4") XP_PACKLO("t2", "s7", "s6")  \
    XP_PACKLO("t3", "s9", "s8")

/* pnn_matmul on Xpulpv2 (matmul_xpulp.c): 1 when it computed the block, 0
 * when the operands need the portable path. */
int pnn_matmul_xpulp(const int8_t *x0, const int8_t *x1, int32_t K, const int8_t *w,
                     const int32_t *bias, int32_t c0, int32_t c1, int32_t off, void *out,
                     size_t o0, size_t o1, const tsr_requant_t *rq);

/* pnn_pointwise on Xpulpv2, channel blocks outermost (matmul_xpulp.c):
 * computes pixels [p, p_end) x channels [c0, c) and returns c. */
int32_t pnn_pointwise_xpulp(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1);
/* the same storing channel-major (pnn_pointwise_chw): pixels [p, *done) x
 * channels [c0, returned) */
int32_t pnn_pointwise_xpulp_chw(const tsr_conv_args_t *a, int32_t p, int32_t p_end, int32_t c0, int32_t c1,
                                int32_t *done);

#endif /* TESSERA_PNN_XPULP_H */
