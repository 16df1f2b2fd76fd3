/* backend_cpu.c: the CPU backend: host memory, the kernels/cpu twins (and
 * the sgemm-based attention of attn_blas.h), and
 * backend_get(), which also says that the CUDA backend is not there yet. */
#include "model/backend.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_blas.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/permute.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/xent.h"

enum { CPU_ALIGN = 64 };

static void *cpu_alloc(size_t bytes)
{
	size_t n = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
	return aligned_alloc(CPU_ALIGN, n ? n : CPU_ALIGN);
}

static void cpu_release(void *p) { free(p); }

/* Large fills and copies are split over the threads: serial ones would
 * leave all but one core idle between the parallel ops. */
enum { PAR_CHUNK = 1 << 20 };

static void cpu_zero(void *p, size_t bytes)
{
	size_t chunks = (bytes + PAR_CHUNK - 1) / PAR_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
	for (size_t c = 0; c < chunks; c++) {
		size_t off = c * PAR_CHUNK;
		memset((char *)p + off, 0, bytes - off < PAR_CHUNK ? bytes - off : PAR_CHUNK);
	}
}

static void cpu_copy(void *dst, const void *src, size_t bytes)
{
	size_t chunks = (bytes + PAR_CHUNK - 1) / PAR_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
	for (size_t c = 0; c < chunks; c++) {
		size_t off = c * PAR_CHUNK;
		memcpy((char *)dst + off, (const char *)src + off,
		       bytes - off < PAR_CHUNK ? bytes - off : PAR_CHUNK);
	}
}

static void cpu_describe(char *buf, size_t n)
{
	snprintf(buf, n, "%s, kernel %s, %d OpenMP threads", openblas_get_config(),
		 openblas_get_corename(), omp_get_max_threads());
}

static size_t cpu_attn_workspace(int B, int H, int T, int D)
{
	return attn_blas_workspace(T);
}

static const lm_backend cpu_backend = {
	.name = "cpu",
	.describe = cpu_describe,
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
	.attn_workspace = cpu_attn_workspace,
	.attn_fwd = attn_fwd_blas,
	.attn_bwd = attn_bwd_blas,
	.swiglu_fwd = swiglu_fwd_cpu,
	.swiglu_bwd = swiglu_bwd_cpu,
	.xent_fwd = xent_fwd_cpu,
	.xent_bwd = xent_bwd_cpu,
	.adamw_step = adamw_step_cpu,
	.sumsq = sumsq_cpu,
};

void backend_set_threads(int n)
{
	if (n > 0)
		omp_set_num_threads(n);
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
