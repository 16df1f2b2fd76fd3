/* backend_cuda_dw.h: the CUDA backend's weight-gradient queue (backend.h's
 * dw_begin, dw_end, dw_wait): a second stream with a cuBLASLt context of
 * its own, forked from the main stream and joined back by events, so that
 * weight-gradient products run beside the main stream's memory-bound
 * passes on a split of the multiprocessors (bench/lm-train-gpu-notes.md,
 * stops 67-68).  In a stream being captured into a graph the fork and the
 * joins become the graph's edges. */
#ifndef LMPIPE_BACKEND_CUDA_DW_H
#define LMPIPE_BACKEND_CUDA_DW_H

#if LMPIPE_CUDA

#include <cuda_runtime.h>

#include "kernels/matmul.h"

typedef struct cuda_dwq cuda_dwq;

/* A queue for a GPU of sms multiprocessors whose products follow
 * *deterministic (matmul_cuda_follow); NULL when a stream, its events or
 * cuBLASLt cannot be had. */
cuda_dwq *cuda_dwq_new(int sms, const int *deterministic);
void cuda_dwq_free(cuda_dwq *q);
/* The queue's stream waits for the work queued so far on main; *st and *mm
 * are what its ops are to use, the products sized for sms - free
 * multiprocessors (free taken into 1 .. sms - 1).  0, or -1 if CUDA
 * refused or DW_EVENTS stretches are not waited for. */
int cuda_dwq_begin(cuda_dwq *q, cudaStream_t main, int free, cudaStream_t *st, matmul_cuda **mm);
/* The ticket (> 0) of the work queued since cuda_dwq_begin, or -1. */
int cuda_dwq_end(cuda_dwq *q);
/* main's later work waits for the queue's up to ticket (every ticket
 * given so far: cuda_dwq_join); 0 or -1. */
int cuda_dwq_wait(cuda_dwq *q, cudaStream_t main, int ticket);
int cuda_dwq_join(cuda_dwq *q, cudaStream_t main);
/* The multiprocessors left to main while some of the queue's work is not
 * waited for (the blocks a pass beside it may take); 0 when none is. */
int cuda_dwq_beside(const cuda_dwq *q);

#endif
#endif
