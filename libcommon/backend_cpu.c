/* backend_cpu.c: the CPU backend: host memory, the kernels/cpu twins, and
 * backend_get(), which also says that the CUDA backend is not there yet. */
#include "backend.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "embedding.h"
#include "matmul.h"
#include "permute.h"
#include "rmsnorm.h"
#include "rope.h"
#include "swiglu.h"
#include "xent.h"

enum { CPU_ALIGN = 64 };

static void *cpu_alloc(size_t bytes)
{
	size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
	void *p = aligned_alloc(CPU_ALIGN, n ? n : CPU_ALIGN);
	if (p)
		memset(p, 0, n);
	return p;
}

static void cpu_release(void *p) { free(p); }
static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static const lm_backend cpu_backend = {
	.name = "cpu",
	.alloc = cpu_alloc,
	.release = cpu_release,
	.zero = cpu_zero,
	.copy = cpu_copy,
	.upload = cpu_copy,
	.download = cpu_copy,
	.embedding_fwd = embedding_fwd_cpu,
	.embedding_bwd = embedding_bwd_cpu,
	.rmsnorm_fwd = rmsnorm_fwd_cpu,
	.rmsnorm_bwd = rmsnorm_bwd_cpu,
	.matmul_fwd = matmul_fwd_cpu,
	.matmul_bwd = matmul_bwd_cpu,
	.rope_fwd = rope_fwd_cpu,
	.rope_bwd = rope_bwd_cpu,
	.qkv_split = qkv_split_cpu,
	.qkv_merge = qkv_merge_cpu,
	.heads_merge = heads_merge_cpu,
	.heads_split = heads_split_cpu,
	.attn_fwd = attn_fwd_cpu,
	.attn_bwd = attn_bwd_cpu,
	.swiglu_fwd = swiglu_fwd_cpu,
	.swiglu_bwd = swiglu_bwd_cpu,
	.xent_fwd = xent_fwd_cpu,
	.xent_bwd = xent_bwd_cpu,
	.adamw_step = adamw_step_cpu,
	.sumsq = sumsq_cpu,
};

void backend_set_threads(int n)
{
	if (n <= 0)
		return;
	omp_set_num_threads(n);
	openblas_set_num_threads(n);
}

const char *const backend_names[] = { "cpu", "cuda", NULL };

const lm_backend *backend_get(const char *name, lm_err *e)
{
	if (!strcmp(name, "cpu"))
		return &cpu_backend;
	if (!strcmp(name, "cuda")) {
		lm_seterr(e, "device 'cuda': the CUDA backend of the model is not available yet "
			  "(only the attention kernel exists); use --device cpu");
		return NULL;
	}
	lm_usage_err(e, "unknown device '%s' (cpu or cuda)", name);
	return NULL;
}
