/*
 * Attention's product of two activations on the cluster (the IR's matmul:
 * Q.K^T and P.V, batched over heads), PULP-NN style:
 *
 *   acc[y][m][n] = sum_k (a[y][m][k] + oa) * (b_y[k][n] + ob)
 *                = sum_k a * b + oa * colsum_b[n] + ob * rowsum_a[m] + K * oa * ob
 *
 * so the inner loop multiplies the raw int8 values four at a time (the 4x2
 * register block of pnn_matmul: pv.sdotsp.b on Xpulp, hardware loops) and
 * the offsets (zero points of QDQ tensors, Deeploy's uint8 softmax output)
 * join as one per-column and one per-row term, exact for any offsets.
 *
 * The right operand is wanted as rows of K values per output column (as
 * weights are): with trans_b it already is (b_y[n][k], attention's K); else
 * each core copies its columns of b_y transposed into its scratch, four at
 * a time, K padded with zeros to a multiple of 4, with their sums.
 *
 * The work is split in units of (batch, 4 output columns), each core a
 * contiguous run of them: eight heads on eight cores is a head per core;
 * four heads of 49 keys is a quarter of the columns of two heads each. Each
 * core transposes only the columns it computes, so no core waits for
 * another (no barrier inside the kernel).
 *
 * Scratch per core: four columns of K rounded up to 4 bytes, their int32
 * sums, and one int32 per row of a (its share of the b offset), the
 * tiler's `matmul` terms in library.yaml. The requantization takes rq32.h's
 * 32-bit path per (batch, column) where it can (per tensor, channel or
 * batch), else pnn_rq_apply or tsr_requantize_at.
 */
#include "pnn_common.h"
#ifdef TSR_ISA_XPULPV2
#include "rq32.h"
#include "xpulp.h"
#endif

/* sum of k int8 values */
static int32_t row_sum(const int8_t *x, int32_t K)
{
    int32_t s = 0, k = 0;
#ifdef TSR_ISA_XPULPV2
    for (; k + 4 <= K; k += 4)
        s = xp_sdotsp(s, xp_lw(x + k), 0x01010101u);
#endif
    for (; k < K; k++)
        s += x[k];
    return s;
}

/* Columns [c0, c1) of batch matrix b ([K][N], or [N][K] with trans_b) into
 * bt as rows of kp bytes (zero padded), and their sums. */
static void gather_columns(const int8_t *b, int32_t K, int32_t N, int trans, int32_t c0, int32_t c1,
                           int32_t kp, int8_t *bt, int32_t *sums)
{
    int32_t c, k;
    for (c = c0; c < c1; c++) {
        int8_t *row = bt + (size_t)(c - c0) * kp;
        if (trans) {
            const int8_t *src = b + (size_t)c * K;
            for (k = 0; k < K; k++)
                row[k] = src[k];
        } else {
#ifdef TSR_ISA_XPULPV2
            xp_gather(row, b + c, N, K);
#else
            for (k = 0; k < K; k++)
                row[k] = b[(size_t)k * N + c];
#endif
        }
        for (k = K; k < kp; k++)
            row[k] = 0;
        sums[c - c0] = row_sum(row, K);
    }
}

/* Requantize and store one output (channel c of pixel (y, m)): the
 * general path (int32 outputs, parameters per element, other roundings). */
static __attribute__((noinline)) void store_general(const tsr_matmul_args_t *a, size_t i, int32_t acc,
                                                    int32_t y, int32_t m, int32_t c)
{
    const tsr_requant_t *rq = a->rq;
    if (!rq)
        ((int32_t *)a->out)[i] = acc;
    else
        ((int8_t *)a->out)[i] = (int8_t)tsr_requantize_at(acc, rq, y, m, c);
}

#ifdef TSR_ISA_XPULPV2
/* Constants of output (y, c) for xp_rq when they are the same for every
 * row m (per tensor, per channel, or per batch: Deeploy's RequantShift per
 * head) and take the 32-bit path; 0 otherwise. */
static int rq_fast(const tsr_requant_t *rq, int32_t y, int32_t c, xp_rq_t *q)
{
    if (!rq || rq->add || rq->neg_mul || rq->rounding != TSR_ROUND_HALF_UP || (rq->elem.plane && rq->elem.step_w))
        return 0;
    return xp_rq_at(rq, rq->elem.plane ? tsr_plane_index(&rq->elem, y, 0, c) : rq->per_channel ? c : 0, q);
}
#endif

/* Rows [0, M) x columns [c0, c1) of batch y, 4 columns at a time: each
 * block's columns gathered into bt (4 rows of kp bytes) with their sums,
 * then every row pair of a against them. rows: the M rows' terms
 * ob * rowsum (computed once for the batch). */
static void batch_block(const tsr_matmul_args_t *a, int32_t y, int32_t c0, int32_t c1, int8_t *bt, int32_t kp,
                        int32_t *rows)
{
    const int32_t K = a->k, M = a->out_w, N = a->out_c, oa = a->a_offset, ob = a->b_offset;
    const int32_t base = K * oa * ob;
    const int8_t *arows = a->a + (size_t)y * M * K;
    const int8_t *b = a->b + (size_t)y * a->b_batch;
    int8_t *out = (int8_t *)a->out;
    const size_t obase = (size_t)y * M * N;
    int32_t *sums = (int32_t *)(bt + 4 * (size_t)kp);
    int32_t c, m, i;
    for (m = 0; m < M; m++)
        rows[m] = ob ? ob * row_sum(arows + (size_t)m * K, K) : 0;
    for (c = c0; c < c1; c += 4) {
        const int32_t nc = c1 - c < 4 ? c1 - c : 4;
        int32_t colterm[4] = {0, 0, 0, 0};
        int fast = nc == 4;
#ifdef TSR_ISA_XPULPV2
        xp_rq_t q[4];
#endif
        gather_columns(b, K, N, a->trans_b, c, c + nc, kp, bt, sums);
        for (i = 0; i < nc; i++) {
            colterm[i] = base + oa * sums[i];
#ifdef TSR_ISA_XPULPV2
            fast = fast && rq_fast(a->rq, y, c + i, &q[i]);
#else
            fast = 0;
#endif
        }
        /* the block's 4 rows of bt (past nc: repeats of the first, never stored) */
        const int8_t *w0 = bt;
        const int8_t *w1 = nc > 1 ? w0 + kp : w0, *w2 = nc > 2 ? w0 + 2 * kp : w0, *w3 = nc > 3 ? w0 + 3 * kp : w0;
        for (m = 0; m < M; m += 2) {
            const int two = m + 1 < M;
            const int8_t *x0 = arows + (size_t)m * K, *x1 = two ? x0 + K : x0;
            int32_t a00 = 0, a10 = 0, a20 = 0, a30 = 0, a01 = 0, a11 = 0, a21 = 0, a31 = 0;
#ifdef TSR_ISA_XPULPV2
            {
                /* the K loop four at a time; the last word of an a row may read
                 * into the next (times bt's zero padding: nothing) */
                const int8_t *p0 = x0, *p1 = x1, *q0 = w0, *q1 = w1, *q2 = w2, *q3 = w3;
                const int32_t n = kp >> 2;
                XP_BLOCK_4X2(XP_SDOTSP, "", "", XP_LEN_4X2);
            }
            if (fast) {
                const int32_t r0 = rows[m];
                int8_t *o = out + obase + (size_t)m * N + c;
                o[0] = xp_rq(a00 + colterm[0] + r0, &q[0]);
                o[1] = xp_rq(a10 + colterm[1] + r0, &q[1]);
                o[2] = xp_rq(a20 + colterm[2] + r0, &q[2]);
                o[3] = xp_rq(a30 + colterm[3] + r0, &q[3]);
                if (two) {
                    const int32_t r1 = rows[m + 1];
                    o += N;
                    o[0] = xp_rq(a01 + colterm[0] + r1, &q[0]);
                    o[1] = xp_rq(a11 + colterm[1] + r1, &q[1]);
                    o[2] = xp_rq(a21 + colterm[2] + r1, &q[2]);
                    o[3] = xp_rq(a31 + colterm[3] + r1, &q[3]);
                }
                continue;
            }
#else
            int32_t k;
            /* the portable path: four products a step (the K loop of the
             * Xpulp block above in plain C) */
#define SDOT4(acc, px, pw)                                                      \
    ((acc) += (int32_t)(px)[0] * (pw)[0] + (int32_t)(px)[1] * (pw)[1]           \
              + (int32_t)(px)[2] * (pw)[2] + (int32_t)(px)[3] * (pw)[3])
            for (k = 0; k + 4 <= kp; k += 4) {
                SDOT4(a00, x0 + k, w0 + k); SDOT4(a01, x1 + k, w0 + k);
                SDOT4(a10, x0 + k, w1 + k); SDOT4(a11, x1 + k, w1 + k);
                SDOT4(a20, x0 + k, w2 + k); SDOT4(a21, x1 + k, w2 + k);
                SDOT4(a30, x0 + k, w3 + k); SDOT4(a31, x1 + k, w3 + k);
            }
#undef SDOT4
            (void)fast;
#endif
            {
                const int32_t acc[2][4] = {{a00, a10, a20, a30}, {a01, a11, a21, a31}};
                int32_t j;
                for (j = 0; j < 1 + two; j++)
                    for (i = 0; i < nc; i++) {
                        const int32_t v = acc[j][i] + colterm[i] + rows[m + j];
                        if (a->rq && !a->rq->elem.plane) {
                            const pnn_rq_t p = pnn_rq_channel(a->rq, c + i);
                            out[obase + (size_t)(m + j) * N + c + i] = pnn_rq_apply(v, &p);
                        } else {
                            store_general(a, obase + (size_t)(m + j) * N + c + i, v, y, m + j, c + i);
                        }
                    }
            }
        }
    }
}

void pnn_matmul2(const tsr_matmul_args_t *a, int core, int ncores)
{
    const int32_t K = a->k, N = a->out_c, kp = (K + 3) & ~3;
    const int32_t blocks = (N + 3) / 4, units = a->out_h * blocks;
    int32_t u0, u1, y;
    int8_t *bt = a->scratch + (size_t)core * a->scratch_bytes;
    pnn_chunk(units, 1, core, ncores, &u0, &u1);
    for (y = u0 / blocks; y < a->out_h && y * blocks < u1; y++) {
        const int32_t first = u0 > y * blocks ? u0 - y * blocks : 0;
        const int32_t last = u1 < (y + 1) * blocks ? u1 - y * blocks : blocks;
        const int32_t c0 = first * 4, c1 = last * 4 < N ? last * 4 : N;
        if (c0 < c1)
            batch_block(a, y, c0, c1, bt, kp, (int32_t *)(bt + 4 * (size_t)kp + 16));
    }
}
