/*
 * Attention's product of two activations on Cortex-M (the IR's matmul:
 * Q.K^T and P.V batched over heads), CMSIS-NN style with the DSP extension:
 *
 *   acc[y][m][n] = sum_k (a[y][m][k] + oa) * (b_y[k][n] + ob)
 *                = sum_k a * b + oa * colsum_b[n] + ob * rowsum_a[m] + K * oa * ob
 *
 * The raw products run two rows by two columns at a time: each row's bytes
 * sign-extended once to int16 pairs (sxtb16, "reordered" as tsr_dsp.h
 * explains), each column's four bytes per step sign-extended in registers,
 * and smlad adds two products per instruction (16 MACs per 8 smlad). The
 * offsets (zero points of QDQ tensors, Deeploy's uint8 softmax output)
 * join as a per-column and a per-row term, exact for any offsets; the
 * requantization is tessera's (tsr_requantize_at), inline in 32 bits for
 * the usual per-tensor one (fast_rq).
 *
 * The right operand is wanted as rows of K values per output column: with
 * trans_b it already is (attention's K); else it is copied transposed into
 * the scratch, K padded to a multiple of 4 with zeros, with the column
 * sums. Scratch: K rounded up to 4 times the tile's columns, 4 bytes per
 * column, and two rows of int16 (the tiler's `matmul` terms).
 */
#include <stddef.h>
#include <stdint.h>

#include "tessera/cmsis_nn.h"
#include "tessera/kernels.h"
#include "tsr_dsp.h"

/* the row's int16 pairs, reordered: word j of 4 bytes v0..v3 -> (v0, v2), (v1, v3) */
static void widen_row(const int8_t *x, int32_t K, int32_t kp, int32_t *out, int32_t *sum)
{
    int32_t k, s = 0;
    for (k = 0; k + 4 <= K; k += 4) {
        const uint32_t v = tsr_ld32(x + k);
        out[k / 2] = tsr_sxtb16(v);
        out[k / 2 + 1] = tsr_sxtb16_ror8(v);
        s += x[k] + x[k + 1] + x[k + 2] + x[k + 3];
    }
    if (k < kp) {       /* the tail, padded with zeros */
        int8_t t[4] = {0, 0, 0, 0};
        for (int32_t i = 0; k + i < K; i++) {
            t[i] = x[k + i];
            s += t[i];
        }
        const uint32_t v = tsr_ld32(t);
        out[k / 2] = tsr_sxtb16(v);
        out[k / 2 + 1] = tsr_sxtb16_ror8(v);
    }
    *sum = s;
}

/* The usual per-tensor requantization (round half up, no additive term,
 * a shift s of 33 or more: QDQ's Q31 multiplier scaled down) in 32 bits,
 * exactly: (acc * mul + 2^(s-1)) >> s == (hi32(acc * mul) + 2^(s-33)) >>
 * (s-32), the rounding term being a multiple of 2^32 (smmul's high word). */
typedef struct {
    int32_t on, mul, round, shift, lo, hi, zp;
} fast_rq_t;

static fast_rq_t fast_rq(const tsr_requant_t *rq)
{
    fast_rq_t q = {0, 0, 0, 0, 0, 0, 0};
    if (!rq || rq->per_channel || rq->add || rq->neg_mul || rq->rounding != TSR_ROUND_HALF_UP || rq->elem.plane ||
        rq->divisor > 1 || rq->shift[0] < 33 || rq->shift[0] > 63)
        return q;
    q.on = 1, q.mul = rq->mul[0], q.round = (int32_t)1 << (rq->shift[0] - 33), q.shift = rq->shift[0] - 32;
    q.lo = rq->lo, q.hi = rq->hi, q.zp = rq->zero_point;
    return q;
}

TSR_INLINE int8_t fast_rq_apply(int32_t acc, const fast_rq_t *q)
{
    int32_t v = (((int32_t)(((int64_t)acc * q->mul) >> 32) + q->round) >> q->shift) + q->zp;
    return (int8_t)(v < q->lo ? q->lo : v > q->hi ? q->hi : v);
}

void tsr_cmsis_matmul(const tsr_matmul_args_t *a, int core, int ncores)
{
    const int32_t K = a->k, M = a->out_w, N = a->out_c, kp = (K + 3) & ~3;
    const int32_t oa = a->a_offset, ob = a->b_offset, base = K * oa * ob;
    int8_t *bt = a->scratch;
    int32_t *sums = (int32_t *)(bt + (size_t)N * kp);
    int32_t *x0 = sums + N, *x1 = x0 + kp / 2;
    const fast_rq_t q = fast_rq(a->rq);
    int32_t y, m, c, k;

    if (core != 0)
        return;   /* one core (the Cortex-M targets) */
    (void)ncores;
    for (y = 0; y < a->out_h; y++) {
        const int8_t *b = a->b + (size_t)y * a->b_batch;
        const int8_t *arows = a->a + (size_t)y * M * K;
        const size_t obase = (size_t)y * M * N;
        for (c = 0; c < N; c++) {
            int8_t *row = bt + (size_t)c * kp;
            int32_t s = 0;
            for (k = 0; k < K; k++) {
                row[k] = a->trans_b ? b[(size_t)c * K + k] : b[(size_t)k * N + c];
                s += row[k];
            }
            for (; k < kp; k++)
                row[k] = 0;
            sums[c] = base + oa * s;
        }
        for (m = 0; m < M; m += 2) {
            const int two = m + 1 < M;
            int32_t r0, r1 = 0;
            widen_row(arows + (size_t)m * K, K, kp, x0, &r0);
            if (two)
                widen_row(arows + (size_t)(m + 1) * K, K, kp, x1, &r1);
            r0 *= ob;
            r1 *= ob;
            for (c = 0; c < N; c += 2) {
                const int pair = c + 1 < N;
                const int8_t *w0 = bt + (size_t)c * kp, *w1 = pair ? w0 + kp : w0;
                int32_t a00 = 0, a01 = 0, a10 = 0, a11 = 0;
                for (k = 0; k < kp; k += 4) {
                    const uint32_t u0 = tsr_ld32(w0 + k), u1 = tsr_ld32(w1 + k);
                    const int32_t w0a = tsr_sxtb16(u0), w0b = tsr_sxtb16_ror8(u0);
                    const int32_t w1a = tsr_sxtb16(u1), w1b = tsr_sxtb16_ror8(u1);
                    const int32_t xa = x0[k / 2], xb = x0[k / 2 + 1];
                    a00 = tsr_smlad(xa, w0a, a00);
                    a00 = tsr_smlad(xb, w0b, a00);
                    a01 = tsr_smlad(xa, w1a, a01);
                    a01 = tsr_smlad(xb, w1b, a01);
                    if (two) {
                        const int32_t za = x1[k / 2], zb = x1[k / 2 + 1];
                        a10 = tsr_smlad(za, w0a, a10);
                        a10 = tsr_smlad(zb, w0b, a10);
                        a11 = tsr_smlad(za, w1a, a11);
                        a11 = tsr_smlad(zb, w1b, a11);
                    }
                }
                {
                    const int32_t acc[2][2] = {{a00 + sums[c] + r0, a01 + (pair ? sums[c + 1] : 0) + r0},
                                               {a10 + sums[c] + r1, a11 + (pair ? sums[c + 1] : 0) + r1}};
                    int32_t i, j;
                    for (j = 0; j < 1 + two; j++)
                        for (i = 0; i < 1 + pair; i++) {
                            const size_t o = obase + (size_t)(m + j) * N + c + i;
                            if (q.on)
                                ((int8_t *)a->out)[o] = fast_rq_apply(acc[j][i], &q);
                            else if (a->rq)
                                ((int8_t *)a->out)[o] = (int8_t)tsr_requantize_at(acc[j][i], a->rq, y, m + j, c + i);
                            else
                                ((int32_t *)a->out)[o] = acc[j][i];
                        }
                }
            }
        }
    }
}
