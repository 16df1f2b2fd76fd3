/* rl_tok.h: rl-update's losses where the tokens' log-probs are: from the
 * per-token cross-entropy of a padded [B, T] micro-batch, each token's
 * loss weight for the weighted backward pass (w = -d loss / d logp, the
 * weight of its cross-entropy) and the statistics of the metrics line,
 * added to a few device scalars, so that a micro-batch crosses to the host
 * only as those scalars.  The arithmetic is that of libcommon/rl/rl_loss.c
 * (rl_grpo_step, rl_dpo_loss), which the CS336 conformance tests check;
 * the C twin reproduces its weights bit for bit (tests/unit/test_rl_tok.c).
 *
 * Common inputs: ce [B*T], the tokens' cross-entropy (logp = -ce; 0 where
 * not counted); targets [B*T], a token counts where its target is >= 0.
 * ws: rl_tok_workspace(B) bytes of the backend's memory (per-row partial
 * statistics, so that they are summed in row order on every backend).
 *
 * Policy gradient (SFT, no_baseline, reinforce_with_baseline, grpo_clip,
 * each with the k3 KL to a reference): row b's score[b] is its reward or
 * advantage, row_w[b] its aggregation weight 1 / (denominator * batch *
 * accumulation) (0: the row counts nothing); old [B*T] the rollout's
 * log-probs (clip only, else NULL), ref [B*T] the reference's (NULL: no KL
 * term), ent [B*T] the tokens' entropies (NULL: none summed).
 *   naive: l = -score logp (fp32), dl = -score
 *   clip:  ratio = exp(logp - old), l = -min(ratio A, clip(ratio) A),
 *          dl = 0 where the clipped term is the smaller one, else -A ratio
 *   KL:    x = ref - logp, l += beta (e^x - x - 1), dl += beta (1 - e^x)
 *   w = -(float)(dl row_w) at counted tokens, 0 elsewhere.
 * stats[RL_ST_*] ACCUMULATE (doubles): the loss (sum of l row_w), counted
 * tokens, clipped tokens, the KL and ratio sums (ratio 1 a token without
 * clipping), and the sums of logp and of the entropies.
 *
 * DPO: rows 2k and 2k+1 are pair k's chosen and rejected responses; ref
 * [B] their summed log-probs under the reference.  With lc, lr the rows'
 * summed logp and z = beta ((lc - ref_c) - (lr - ref_r)): loss
 * softplus(-z) / npairs; every counted token of the chosen row gets w =
 * (float)(beta sigmoid(-z) / npairs), of the rejected row its negative.
 * stats[RL_DPO_*] ACCUMULATE: the loss, counted tokens, sum of lc + lr,
 * sum of margins, pairs with a positive margin, pairs. */
#ifndef LMPIPE_RL_TOK_H
#define LMPIPE_RL_TOK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rl_tok_stat {
	RL_ST_LOSS, RL_ST_TOKENS, RL_ST_CLIPPED, RL_ST_KL, RL_ST_RATIO, RL_ST_LOGP, RL_ST_ENT,
	RL_ST_N
};
enum rl_dpo_stat { RL_DPO_LOSS, RL_DPO_TOKENS, RL_DPO_LOGP, RL_DPO_MARGIN, RL_DPO_RIGHT, RL_DPO_PAIRS };

typedef struct rl_tok_args {
	int clip;                 /* 1: grpo_clip, 0: naive (score times logp) */
	float clip_low, clip_high;
	double kl_beta;           /* with ref */
} rl_tok_args;

/* Bytes of workspace for B rows. */
static inline size_t rl_tok_workspace(int B) { return (size_t)(B > 0 ? B : 1) * RL_ST_N * sizeof(double); }

void rl_tok_pg_cpu(float *w, double *stats, double *ws, const float *ce, const int32_t *targets,
		   const float *score, const double *row_w, const float *old, const float *ref,
		   const float *ent, int B, int T, rl_tok_args a);
void rl_tok_dpo_cpu(float *w, double *stats, double *ws, const float *ce, const int32_t *targets,
		    const double *ref, double beta, double npairs, int B, int T);

/* CUDA twins: every pointer device memory; one block a row (a pair), the
 * partial statistics summed in row order by one thread. */
int rl_tok_pg_cuda(float *w, double *stats, double *ws, const float *ce, const int32_t *targets,
		   const float *score, const double *row_w, const float *old, const float *ref,
		   const float *ent, int B, int T, rl_tok_args a, void *stream);
int rl_tok_dpo_cuda(float *w, double *stats, double *ws, const float *ce, const int32_t *targets,
		    const double *ref, double beta, double npairs, int B, int T, void *stream);

#ifdef __cplusplus
}
#endif

#endif
