/* convert.h: the type changes at the edges of the CUDA backend: fp32 to
 * bf16 (round to nearest even) and back, and an fp32 addition into a bf16
 * tensor (extra gradients from the host).  bf16 tensors are uint16_t bit
 * patterns here so that C callers need no CUDA headers; n elements, device
 * memory, stream a cudaStream_t.  Return 0, or -1 if the launch failed.
 * The CPU backend computes in fp32 and needs none of these. */
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

#ifdef __cplusplus
}
#endif

#endif
