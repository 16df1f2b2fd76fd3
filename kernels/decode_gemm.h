/* decode_gemm.h: the CPU decoder's matrix product with weights packed once,
 * for libcommon/gen/model_decode_cpu.c.
 *
 *   out[N, OUT] (+)= inp[N, IN] . W[OUT, IN]^T      (matmul.h's layout)
 *
 * A BLAS sgemm repacks W on every call: at one decoding step per call, with
 * a thread per column slice, that copy of every weight costs about as much
 * as the product.  Here W is packed when the decoder is made, into panels
 * of DEC_PANEL output columns, each [IN][DEC_PANEL] (the DEC_PANEL weights
 * of one input position side by side, zeros past OUT), 64-byte aligned; a
 * register tile of rows x panels is streamed along IN, each row's input
 * broadcast.
 *
 * Every output is the sum over k = 0 .. IN-1, in order, of one product at a
 * time (fused multiply-add where the CPU has it): a row's result does not
 * depend on N, on the tile it falls in or on the column slice, so a batch
 * gives bit for bit what one sequence at a time gives.  The widest code the
 * CPU runs is picked at run time (AVX-512, AVX2, else plain vectors). */
#ifndef LMPIPE_DECODE_GEMM_H
#define LMPIPE_DECODE_GEMM_H

#include <stddef.h>

enum { DEC_PANEL = 16, DEC_PACK_ALIGN = 64 };

/* Floats that W [OUT][IN] takes packed (OUT rounded up to whole panels). */
size_t dec_packed_floats(int IN, int OUT);

/* Pack W [OUT][IN] (row-major) into dst (dec_packed_floats(IN, OUT) floats,
 * DEC_PACK_ALIGN-aligned). */
void dec_pack(float *dst, const float *w, int IN, int OUT);

/* Columns [lo, hi) of out (rows ldo apart) = inp [N][IN] times the packed
 * W's transpose (+ out when accumulate).  lo is a multiple of DEC_PANEL;
 * hi <= OUT. */
void dec_gemm_cols(float *out, int ldo, const float *inp, int N, int IN, const float *packed,
		   int lo, int hi, int accumulate);

/* The code paths; dec_gemm_cols takes the widest the CPU runs
 * (dec_gemm_best), dec_gemm_cols_on the one given (<= dec_gemm_best(); for
 * tests of the narrower ones).  Each path sums in the same order, but only
 * the wide ones fuse the multiply-adds. */
enum { DEC_GEMM_BASE, DEC_GEMM_AVX2, DEC_GEMM_AVX512 };
int dec_gemm_best(void);
void dec_gemm_cols_on(int path, float *out, int ldo, const float *inp, int N, int IN,
		      const float *packed, int lo, int hi, int accumulate);

/* The gated unit of the feed-forward block in one pass: W [2F][IN] is the
 * gate's F rows then the up projection's (model.h's wgu), packed by
 * dec_pack_glu as pairs of panels (gate, up) of the same columns, and
 *   out[n][f] = silu(g) u,  g = inp[n] . W[f],  u = inp[n] . W[F + f]
 * for the columns f in [lo, hi) (lo a multiple of DEC_PANEL, hi <= F), with
 * swiglu_fwd_cpu's arithmetic on the sums: neither sum is written out. */
size_t dec_packed_glu_floats(int IN, int F);
void dec_pack_glu(float *dst, const float *w, int IN, int F);
void dec_gemm_glu_cols(float *out, int ldo, const float *inp, int N, int IN, const float *packed,
		       int lo, int hi);
void dec_gemm_glu_cols_on(int path, float *out, int ldo, const float *inp, int N, int IN,
			  const float *packed, int lo, int hi);

#endif
