/* test_ops.c: every CUDA op against its CPU twin on several shapes (one
 * table entry per op, see gpu_harness.h), then each op's own extra checks
 * (bad input, reference data).  Run by `make test-gpu` on a GPU machine. */
#include "gpu_harness.h"
#include "op_attention.h"
#include "op_gemm.h"

static const gpu_op ops[] = {
	ATTN_OP,
	ATTN_DET_OP,
	GEMM_OP,
	GEMM_SWIGLU_OP,
	GEMM_EXP_OP,
	GEMM_ROPE_OP,
};

int main(void)
{
	enum { SEED = 20261130 };
	gpu_require_device();
	gpu_run_ops(ops, (int)(sizeof ops / sizeof *ops), SEED);
	attn_repeatable();
	attn_short_repeatable();
	attn_det_repeatable(2, 3, 1024, 64, 1);
	attn_det_repeatable(1, 2, 2049, 128, 1);
	attn_det_repeatable(1, 2, 1000, 64, 0);
	attn_det_repeatable(1, 4, 333, 128, 1);
	attn_bad_input();
	attn_cs336();
	gemm_refused();
	return done_testing();
}
