/* model_decode_internal.h: what the decoder (model_decode.c) and the CPU
 * backend's own pass (model_decode_cpu.c) share: the layout of the cache,
 * here so that both read it from one place and neither file calls back
 * into the other; and the CPU pass, which model_decode.c calls. */
#ifndef LMPIPE_MODEL_DECODE_INTERNAL_H
#define LMPIPE_MODEL_DECODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gen/model_decode.h"

/* Values in one layer's cache block of one slot: [H][n_ctx][D]. */
static inline size_t model_decoder_cache_stride(const model_decoder *md)
{
	const model_config *c = &md->m->cfg;
	return (size_t)c->n_heads * md->n_ctx * (c->d_model / c->n_heads);
}

/* Layer l's cache block of one slot in base (kc or vc), values of esz bytes. */
static inline void *model_decoder_cache_at(const model_decoder *md, void *base, size_t esz, int l,
					   uint32_t slot)
{
	return (char *)base + ((size_t)l * md->n_slots + slot) * model_decoder_cache_stride(md) * esz;
}

/* The same for the CPU pass's fp32 cache. */
static inline float *model_decoder_cache(const model_decoder *md, float *base, int l, uint32_t slot)
{
	return model_decoder_cache_at(md, base, sizeof(float), l, slot);
}

/* The CPU backend's packing of the weights (0, or -1 out of memory); and
 * its pass over a chunk of N tokens (ids, pos, tok_slot and last_of set),
 * logits to out[last_of[i]]. */
int model_decode_cpu_pack(model_decoder *md);
void model_decode_cpu_chunk(model_decoder *md, int N, float *const *out);

#endif
