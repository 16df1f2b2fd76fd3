/* sdpa.h: scaled dot-product attention with an explicit mask and different
 * query and key lengths, forward only, CPU reference.
 *
 * q [BH, Tq, D], k and v [BH, Tk, D], o [BH, Tq, D]; mask [BH, Tq, Tk]
 * (nonzero: the query may attend to the key) or NULL for full attention.
 * A query whose keys are all masked gets a zero output.  This is the CS336
 * scaled_dot_product_attention; the training path uses attention.h (square,
 * causal, with a backward pass), and decoding with a KV cache uses this one
 * (Tq new queries against Tk cached keys). */
#ifndef LMPIPE_SDPA_H
#define LMPIPE_SDPA_H

#include <stdint.h>

void sdpa_fwd_cpu(float *o, const float *q, const float *k, const float *v,
		  const uint8_t *mask, int BH, int Tq, int Tk, int D, float scale);

#endif
