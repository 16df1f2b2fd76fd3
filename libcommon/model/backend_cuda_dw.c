/* backend_cuda_dw.c: the CUDA backend's weight-gradient queue (see
 * backend_cuda_dw.h).  Tickets count the stretches of work queued on it;
 * stretch t signals done[t % DW_EVENTS] when it ends.  The model waits
 * for each stretch long before DW_EVENTS more are queued (at each layer's
 * end), and cuda_dwq_begin refuses to reuse an event nothing has waited
 * for, so a wait never finds its event recorded again. */
#include "model/backend_cuda_dw.h"

#if LMPIPE_CUDA

#include <stdlib.h>

enum { DW_EVENTS = 16 };

struct cuda_dwq {
	cudaStream_t st;
	matmul_cuda *mm;
	cudaEvent_t fork, done[DW_EVENTS];
	int sms, free;     /* the GPU's multiprocessors; those the last stretch left to main */
	int issued, waited; /* the last ticket given, and the last main waited for */
};

cuda_dwq *cuda_dwq_new(int sms, const int *deterministic)
{
	cuda_dwq *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->sms = sms;
	int bad = cudaStreamCreateWithFlags(&q->st, cudaStreamNonBlocking) != cudaSuccess ||
		  cudaEventCreateWithFlags(&q->fork, cudaEventDisableTiming) != cudaSuccess;
	for (int i = 0; i < DW_EVENTS && !bad; i++)
		bad = cudaEventCreateWithFlags(&q->done[i], cudaEventDisableTiming) != cudaSuccess;
	if (bad || !(q->mm = matmul_cuda_new(q->st))) {
		cudaGetLastError();
		cuda_dwq_free(q);
		return NULL;
	}
	matmul_cuda_follow(q->mm, deterministic);
	/* The heuristic's first algorithm for the queue's products: timed
	 * alone, the fastest is not the best beside the pass (overlap_bench
	 * OVERLAP_CANDS at gpt2s's gate/up: the first candidate ran beside it
	 * in 0.335 ms, the others in 0.41-0.67 against 0.400 one after the
	 * other; the timed choice made gpt2s's step 4 % slower in one run of
	 * two, stop 69).  LMPIPE_DW_AUTOTUNE=1 times them as the main
	 * stream's are. */
	const char *at = getenv("LMPIPE_DW_AUTOTUNE");
	if (!(at && *at == '1'))
		matmul_cuda_set_autotune(q->mm, 0);
	return q;
}

void cuda_dwq_free(cuda_dwq *q)
{
	if (!q)
		return;
	if (q->st)
		cudaStreamSynchronize(q->st);
	matmul_cuda_free(q->mm);
	for (int i = 0; i < DW_EVENTS; i++)
		if (q->done[i])
			cudaEventDestroy(q->done[i]);
	if (q->fork)
		cudaEventDestroy(q->fork);
	if (q->st)
		cudaStreamDestroy(q->st);
	free(q);
}

int cuda_dwq_begin(cuda_dwq *q, cudaStream_t main, int free, cudaStream_t *st, matmul_cuda **mm)
{
	if (q->issued - q->waited >= DW_EVENTS)
		return -1;
	if (free < 1)
		free = 1;
	if (free > q->sms - 1)
		free = q->sms - 1;
	q->free = free;
	matmul_cuda_set_sm_target(q->mm, q->sms - free);
	if (cudaEventRecord(q->fork, main) != cudaSuccess ||
	    cudaStreamWaitEvent(q->st, q->fork, 0) != cudaSuccess)
		return -1;
	*st = q->st;
	*mm = q->mm;
	return 0;
}

int cuda_dwq_end(cuda_dwq *q)
{
	int t = q->issued + 1;
	if (cudaEventRecord(q->done[t % DW_EVENTS], q->st) != cudaSuccess)
		return -1;
	q->issued = t;
	return t;
}

int cuda_dwq_wait(cuda_dwq *q, cudaStream_t main, int ticket)
{
	if (ticket > q->issued)
		ticket = q->issued;
	if (ticket <= q->waited)
		return 0;
	if (cudaStreamWaitEvent(main, q->done[ticket % DW_EVENTS], 0) != cudaSuccess)
		return -1;
	q->waited = ticket;
	return 0;
}

int cuda_dwq_join(cuda_dwq *q, cudaStream_t main)
{
	return q ? cuda_dwq_wait(q, main, q->issued) : 0;
}

int cuda_dwq_beside(const cuda_dwq *q)
{
	return q && q->issued > q->waited ? q->free : 0;
}

#endif
