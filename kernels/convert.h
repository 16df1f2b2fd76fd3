/* convert.h: the type changes at the edges of the CUDA backend: fp32 to
 * bf16 (round to nearest even) and back, and an fp32 addition into a bf16
 * tensor (extra gradients from the host).  bf16 tensors are uint16_t bit
 * patterns here so that C callers need no CUDA headers; n elements, device
 * memory, stream a cudaStream_t.  Return 0, or -1 if the launch failed.
 * The CPU backend computes in fp32 and needs none of these but one:
 * round_bf16_cpu, which rounds an fp32 tensor in place to the values bf16
 * can hold (its residual stream under lm-train --residual bf16), so that
 * its numbers are those of a stream stored in bf16. */
#ifndef LMPIPE_CONVERT_H
#define LMPIPE_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int f32_to_bf16_cuda(uint16_t *dst, const float *src, size_t n, void *stream);
int bf16_to_f32_cuda(float *dst, const uint16_t *src, size_t n, void *stream);
int bf16_add_f32_cuda(uint16_t *dst, const float *src, size_t n, void *stream);

/* x[i] = the bf16 nearest x[i] (ties to even, as f32_to_bf16_cuda), back
 * in fp32; NaN stays NaN, infinities stay. */
void round_bf16_cpu(float *x, size_t n);

#ifdef __cplusplus
}
#endif

#endif
