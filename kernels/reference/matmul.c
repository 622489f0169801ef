/*
 * Reference product of two activation tiles (the IR's matmul: QuantLib's
 * MatMul of two non-constant operands), batch by batch:
 *   acc[y][x][c] = sum_k (a[y][x][k] + a_offset) * (b_y[k][c] + b_offset)
 * Rows y of the tile are batches, columns x the rows of each batch's
 * matrix; b_y is the tile's [k][out_c] slice of batch y's right operand
 * ([out_c][k] with trans_b).
 * Each core computes a contiguous run of ceil(out_h * out_w / ncores)
 * output pixels (rows of the product).
 */
#include "ref_common.h"

void tsr_matmul(const tsr_matmul_args_t *a, int core, int ncores)
{
    const int32_t K = a->k, N = a->out_c, ao = a->a_offset, bo = a->b_offset;
    int32_t p, p0, p1, c, k;

    tsr_ref_share(a->out_h * a->out_w, core, ncores, &p0, &p1);
    for (p = p0; p < p1; p++) {
        const int32_t y = p / a->out_w, x = p % a->out_w;
        const int8_t *row = a->a + (size_t)p * K;
        const int8_t *b = a->b + (size_t)y * a->b_batch;
        for (c = 0; c < N; c++) {
            int32_t acc = 0;
            if (a->trans_b)
                for (k = 0; k < K; k++)
                    acc += (row[k] + ao) * (b[(size_t)c * K + k] + bo);
            else
                for (k = 0; k < K; k++)
                    acc += (row[k] + ao) * (b[(size_t)k * N + c] + bo);
            tsr_ref_store_at(a->out, (size_t)p * N + c, acc, a->rq, y, x, c);
        }
    }
}
