/* decode.h: the ops of a generation step over a key/value cache
 * (gen/model_decode.c drives them through the op table).
 *
 * A step holds N new tokens; token i belongs to the sequence in cache slot
 * slot[i] and sits at position pos[i] of it.  One layer's cache is
 * [S][Hkv][n_ctx][D] (S slots, Hkv key/value heads; query head h reads
 * key/value head h / (H / Hkv), so Hkv < H is grouped-query attention).
 *
 *   decode_qkv   qkv [N][(H + 2 Hkv) D] (the fused projection: query heads,
 *                then key heads, then value heads) -> q [N][H][D] rotated by
 *                RoPE at pos[i]; the rotated key and the value stored at
 *                cache[slot[i]][h][pos[i]].  cs is the model's RoPE table
 *                [ctx][D/2][2] (rope.h's convention).
 *   attn_decode  o [N][H][D] = softmax(scale q . K^T) V over positions
 *                0 .. pos[i] of slot[i]'s cache: a step stores every token's
 *                key first, so the tokens of one prompt fed together attend
 *                causally.
 *   attn_decode_qkv  decode_qkv then attn_decode in one pass, for a step
 *                whose tokens are in distinct slots (a decoding step: each
 *                token reads no other token's new key): block (i, h)
 *                rotates its query in shared memory, stores its key/value
 *                head's rotated key and value (every query head of a group
 *                stores the same bytes) and attends over the cache, its own
 *                store included.  The same bits as the two ops; CUDA only,
 *                for D of 32, 64 or 128 (else -1, and nothing is done); 1
 *                (nothing done) when a step of few blocks (the three-pass
 *                kernel, whose scores sit in shared memory) would need more
 *                than the device gives one (n_ctx near 57 K at D = 128 on an
 *                H100): the caller falls back to the two ops.
 *   rows_gather  dst[j] = src[idx[j]], rows of C fp32 values.
 *   rows_scatter dst[idx[j]] = src[j], rows of V values: act in, fp32 out
 *                (the last tokens' logits into each slot's row).
 *
 * The CPU twins are fp32; the CUDA versions take bf16 (uint16_t bit
 * patterns) for q, qkv, o, the caches and the scattered source, with fp32
 * arithmetic.  CUDA launchers return 0, or -1 if the launch failed. */
#ifndef LMPIPE_DECODE_H
#define LMPIPE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct decode_shape {
	int N, H, Hkv, D, n_ctx;
} decode_shape;

void decode_qkv_cpu(float *q, float *kc, float *vc, const float *qkv, const float *cs,
		    const int32_t *pos, const int32_t *slot, decode_shape s);
/* Returns 0, or -1 when its scratch cannot be allocated. */
int attn_decode_cache_cpu(float *o, const float *q, const float *kc, const float *vc,
			  const int32_t *pos, const int32_t *slot, decode_shape s, float scale);
void rows_gather_cpu(float *dst, const float *src, const int32_t *idx, int n, int C);
void rows_scatter_cpu(float *dst, const float *src, const int32_t *idx, int n, int V);

int decode_qkv_cuda(uint16_t *q, uint16_t *kc, uint16_t *vc, const uint16_t *qkv, const float *cs,
		    const int32_t *pos, const int32_t *slot, decode_shape s, void *stream);
int attn_decode_cache_cuda(uint16_t *o, const uint16_t *q, const uint16_t *kc, const uint16_t *vc,
			   const int32_t *pos, const int32_t *slot, decode_shape s, float scale,
			   void *stream);
int attn_decode_qkv_cuda(uint16_t *o, uint16_t *kc, uint16_t *vc, const uint16_t *qkv,
			 const float *cs, const int32_t *pos, const int32_t *slot, decode_shape s,
			 float scale, void *stream);
int rows_gather_cuda(float *dst, const float *src, const int32_t *idx, int n, int C, void *stream);
int rows_scatter_cuda(float *dst, const uint16_t *src, const int32_t *idx, int n, int V,
		      void *stream);

#ifdef __cplusplus
}
#endif

#endif
