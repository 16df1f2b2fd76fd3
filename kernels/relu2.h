/* relu2.h: the squared-ReLU MLP's activation, forward and backward, on n
 * values of the up projection h:  out = max(h, 0)^2,  dh = 2 max(h, 0) dout.
 * The backward pass overwrites dh (dh may be dout). */
#ifndef LMPIPE_RELU2_H
#define LMPIPE_RELU2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void relu2_fwd_cpu(float *out, const float *h, size_t n);
void relu2_bwd_cpu(float *dh, const float *dout, const float *h, size_t n);

/* CUDA twin on bf16 (uint16_t bit patterns), computed in fp32. */
int relu2_fwd_cuda(uint16_t *out, const uint16_t *h, size_t n, void *stream);
int relu2_bwd_cuda(uint16_t *dh, const uint16_t *dout, const uint16_t *h, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
