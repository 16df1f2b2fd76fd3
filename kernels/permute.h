/* permute.h: the layout changes around attention.
 *
 * The fused q/k/v projection produces qkv[B, T, 3, H, D] (q, then k, then
 * v for each token); attention wants q, k, v as [B, H, T, D] each.
 *   qkv_split:  qkv -> q, k, v         qkv_merge: dq, dk, dv -> dqkv (backward)
 *   heads_merge: o[B, H, T, D] -> y[B, T, H, D]   heads_split: the backward
 * Every function overwrites its output. */
#ifndef LMPIPE_PERMUTE_H
#define LMPIPE_PERMUTE_H

void qkv_split_cpu(float *q, float *k, float *v, const float *qkv, int B, int T, int H, int D);
void qkv_merge_cpu(float *dqkv, const float *dq, const float *dk, const float *dv,
		   int B, int T, int H, int D);
void heads_merge_cpu(float *y, const float *o, int B, int T, int H, int D);
void heads_split_cpu(float *dO, const float *dy, int B, int T, int H, int D);

#endif
