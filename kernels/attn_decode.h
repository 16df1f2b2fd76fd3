/* attn_decode.h: attention of new query tokens against a key/value cache,
 * for generation (each token attends to its own sequence's positions
 * 0 .. len[i]-1, itself included: causal by construction).
 *
 *   q    [H, N, D]   the N new tokens' queries (qkv_split's layout, B = 1)
 *   kc[i], vc[i]     token i's sequence cache for this layer: [H, stride, D]
 *   len[i]           positions of that cache to attend to
 *   o    [N, H, D]   the output, heads already merged ([N, C])
 *
 * Float32, the arithmetic of attn_fwd_cpu's rows (scores, max, exp,
 * normalised sum) with the dot products vectorised.  OpenMP over (token,
 * head).  Returns 0, or -1 when its scratch rows cannot be allocated. */
#ifndef LMPIPE_ATTN_DECODE_H
#define LMPIPE_ATTN_DECODE_H

#include <stddef.h>

int attn_decode_cpu(float *o, const float *q, const float *const *kc, const float *const *vc,
		     const int *len, int N, int H, int D, size_t stride, float scale);

#endif
