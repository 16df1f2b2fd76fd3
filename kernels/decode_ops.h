/* decode_ops.h: the pieces of a CPU decoding step (libcommon/gen/model_decode_cpu.c)
 * that run inside one OpenMP parallel region: each works on the slice of
 * rows or columns it is given, so a thread calls it for its own share, and
 * threads meet at a spinning barrier instead of a parallel region per op.
 * A token of a small model is a few microseconds of arithmetic per op:
 * waking a thread team for each (a futex round trip when OpenMP threads
 * sleep) would cost more than the op.
 *
 * Float32; the arithmetic of the ops of rmsnorm.h and rope.h (swiglu.h's
 * is in decode_gemm.h's gated product), so a step's logits equal a full
 * forward pass's up to rounding (the matrix products, decode_gemm.h, sum
 * in another order than the BLAS). */
#ifndef LMPIPE_DECODE_OPS_H
#define LMPIPE_DECODE_OPS_H

#include <stdatomic.h>
#include <stddef.h>

/* A barrier for the threads of one parallel region: thread t > 0 marks
 * its own cache line and waits for thread 0 to announce the next
 * generation; thread 0 waits for every mark, then announces.  No line is
 * written by more than one thread, so a barrier costs two cache-line
 * transfers in turn, not one per thread queued on one counter (16 threads
 * of the benchmark machine: 0.64 us, against 2.5-3 us with a shared
 * counter).  Waiting
 * threads spin (with a pause) for a while, then yield the core, so an
 * oversubscribed machine still makes progress. */
struct dec_mark;
typedef struct dec_barrier {
	struct dec_mark *mark; /* per thread: the generation it has reached */
	struct dec_mark *gen;  /* the generation thread 0 announced */
	int max_threads;
} dec_barrier;

/* For teams of up to max_threads: 0, or -1 out of memory. */
int dec_barrier_init(dec_barrier *b, int max_threads);
void dec_barrier_free(dec_barrier *b);
/* Thread t of a team of nt (every thread of the team calls it). */
void dec_barrier_wait(dec_barrier *b, int t, int nt);

/* [lo, hi): block t of nt of n items, in multiples of align. */
void dec_split(int n, int t, int nt, int align, int *lo, int *hi);

/* y = x * rstd * w over one row of C (y not overlapping x): as
 * rmsnorm_fwd_cpu, but the sum of squares in 16 interleaved partial sums
 * (vectorised; the same order for every row). */
void dec_rmsnorm_row(float *y, const float *x, const float *w, int C, float eps);

/* Rotate one head vector of D by the cos/sin row cs (rope.h's table and
 * rotate-half pairing). */
void dec_rope_row(float *x, const float *cs, int D);

/* One query row q[D] against n cached keys/values k, v ([n][D]), output
 * o[D]; s is scratch for n scores (attn_decode_cpu's arithmetic). */
void attn_decode_row(float *o, const float *q, const float *k, const float *v, int n, int D,
		     float scale, float *s);

/* The index of the first NaN or +inf of a row, or -1 when there is none. */
long dec_row_bad(const float *x, size_t n);

/* The largest entry of a row without NaN (n >= 1), and at *at the lowest
 * index holding it: a sequential scan's answer, vectorised. */
float dec_row_argmax(const float *x, size_t n, size_t *at);

#endif
