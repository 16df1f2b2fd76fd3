/* test_rl_ppo_tok.c: the C twin of rl-update's PPO loss op
 * (kernels/rl_ppo_tok.h) against the code rl-update called before the op
 * existed: vh_forward on each row's completion tokens, rl_ppo_loss on the
 * row, vh_backward into a zeroed head gradient added to the running one.
 * Tokens' weights, the entropies' and the hidden states' gradients, the
 * values and the head's gradient must be equal bit for bit, the
 * statistics within 1e-12; a second call accumulates.  Cases: symmetric
 * and clip-higher ratios, tight and loose value clipping, with and without
 * the entropy bonus.  A planted fault (the upper ratio clip moved by
 * 0.01) must be seen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "kernels/rl_ppo_tok.h"
#include "rl/rl_ppo.h"
#include "rl/value_head.h"

enum { B = 5, T = 19, C = 24 };
static const double TOL = 1e-12;

static float ce[B * T], old[B * T], adv[B * T], old_v[B * T], ret[B * T], ent[B * T];
static float hidden[B * T * C], head[C + 1];
static int32_t tg[B * T];
static int first[B], len[B];
static double scale[B];

static float frand(void) { return (float)rand() / (float)RAND_MAX; }

/* Rows of lengths len[b] (padding after), prompts of b % 3 + 1 tokens, one
 * row without completion tokens. */
static void make_batch(unsigned seed)
{
	srand(seed);
	for (int j = 0; j <= C; j++)
		head[j] = 0.3f * (frand() - 0.5f);
	for (int b = 0; b < B; b++) {
		len[b] = T - 3 * b;
		first[b] = b % 3 + 1;
		scale[b] = 1.0 / ((len[b] - first[b]) * 7.0);
		for (int t = 0; t < T; t++) {
			size_t i = (size_t)b * T + t;
			int counted = t < len[b] && t >= first[b] && b != 2;
			tg[i] = counted ? 5 : -1;
			ce[i] = counted ? 0.05f + 3.0f * frand() : 0.0f;
			old[i] = counted ? -ce[i] + 0.5f * (frand() - 0.5f) : 0.0f;
			adv[i] = counted ? 2.0f * (frand() - 0.5f) : 0.0f;
			old_v[i] = counted ? frand() - 0.5f : 0.0f;
			ret[i] = counted ? 2.0f * (frand() - 0.5f) : 0.0f;
			ent[i] = 4.0f * frand();
			for (int j = 0; j < C; j++)
				hidden[i * C + j] = 2.0f * (frand() - 0.5f);
		}
	}
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

typedef struct ppo_case {
	const char *name;
	rl_ppo_tok_args a;
} ppo_case;

/* What rl-update computed on the host, the way it did. */
static void host(const ppo_case *c, float *w, float *dent, float *dhid, value_head *h,
		 double *loss, rl_ppo_stats *st)
{
	float values[T], dlogp[T], dvalue[T], dent_row[T], logp[B * T];
	for (int i = 0; i < B * T; i++)
		logp[i] = ce[i] == 0 ? 0.0f : -ce[i];
	memset(w, 0, sizeof(float) * B * T);
	memset(dent, 0, sizeof(float) * B * T);
	memset(dhid, 0, sizeof(float) * B * T * C);
	float *gw = h->gw, gb = h->gb[0], mb[C];
	h->gw = mb;
	vh_zero_grad(h);
	rl_ppo_args a = { c->a.clip_low, c->a.clip_high, c->a.vf_clip, c->a.vf_coef, c->a.ent_coef };
	for (int b = 0; b < B; b++) {
		if (b == 2)
			continue;
		size_t k = (size_t)(len[b] - first[b]), o = (size_t)b * T + first[b];
		vh_forward(h, hidden + o * C, k, values);
		*loss += rl_ppo_loss(&a, logp + o, old + o, adv + o, values, old_v + o, ret + o,
				     ent + o, k, scale[b], dlogp, dvalue, dent_row, st);
		for (size_t t = 0; t < k; t++) {
			w[o + t] = -dlogp[t];
			dent[o + t] = dent_row[t];
		}
		vh_backward(h, hidden + o * C, dvalue, k, dhid + o * C);
	}
	for (int j = 0; j < C; j++)
		gw[j] += h->gw[j];
	h->gw = gw;
	h->gb[0] += gb;
}

/* 1 when the op's outputs equal the host's bit for bit (two calls, the
 * head's gradient and the statistics accumulating); fault moves the op's
 * upper ratio clip. */
static int check(const ppo_case *c, float fault)
{
	static float w[B * T], dent[B * T], dval[B * T], dhid[B * T * C];
	static float hw[B * T], hdent[B * T], hdhid[B * T * C];
	static double ws[4096];
	double stats[RL_PPO_N] = { 0 }, loss = 0;
	float hgrad[C + 1] = { 0 }, hgw[C];
	value_head h;
	if (vh_init(&h, C, NULL))
		return 0;
	memcpy(h.w, head, C * sizeof *head);
	h.b[0] = head[C];
	rl_ppo_stats st = { 0 };
	rl_ppo_tok_args a = c->a;
	a.clip_high += fault;
	if (rl_ppo_workspace(B, T, C) > sizeof ws)
		return 0;
	int same = 1;
	for (int call = 0; call < 2; call++) {
		host(c, hw, hdent, hdhid, &h, &loss, &st);
		rl_ppo_tok_cpu(w, dent, dval, dhid, hgrad, stats, ws, ce, tg, hidden, head, ent, old, adv,
			       old_v, ret, scale, B, T, C, a);
		same &= !memcmp(w, hw, sizeof w) && !memcmp(dent, hdent, sizeof dent) &&
			!memcmp(dhid, hdhid, sizeof dhid);
	}
	memcpy(hgw, h.gw, sizeof hgw);
	same &= !memcmp(hgrad, hgw, sizeof hgw) && !memcmp(&hgrad[C], h.gb, sizeof(float));
	if (fault == 0) {
		ok(same, "%s: weights, entropy and hidden gradients, head gradient bit for bit", c->name);
		ok(rel(stats[RL_PPO_LOSS], loss) < TOL && rel(stats[RL_PPO_PG], st.pg) < TOL &&
		   rel(stats[RL_PPO_VF], st.vf) < TOL && rel(stats[RL_PPO_ENT], st.entropy) < TOL &&
		   rel(stats[RL_PPO_RATIO], st.ratio) < TOL,
		   "%s: loss %.17g (want %.17g), pg, vf, entropy, ratio sums", c->name,
		   stats[RL_PPO_LOSS], loss);
		ok(stats[RL_PPO_CLIPPED] == st.clipped && stats[RL_PPO_VF_CLIPPED] == st.vf_clipped &&
		   stats[RL_PPO_TOKENS] == (double)st.tokens,
		   "%s: clipped %g (want %g), value-clipped %g (want %g), tokens %g", c->name,
		   stats[RL_PPO_CLIPPED], st.clipped, stats[RL_PPO_VF_CLIPPED], st.vf_clipped,
		   stats[RL_PPO_TOKENS]);
	}
	vh_free(&h);
	return same;
}

int main(void)
{
	static const ppo_case cases[] = {
		{ "symmetric clip, loose value clip", { 0.2f, 0.2f, 10.0f, 0.1, 0.0 } },
		{ "clip-higher, tight value clip", { 0.1f, 0.28f, 0.05f, 0.5, 0.0 } },
		{ "entropy bonus", { 0.2f, 0.2f, 0.2f, 0.1, 0.01 } },
		{ "tight ratio clip, entropy bonus", { 0.02f, 0.02f, 0.1f, 1.0, 0.05 } },
	};
	make_batch(20261201);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		check(&cases[i], 0);
	ok(!check(&cases[3], 0.01f),
	   "planted fault: the upper ratio clip moved by 0.01 changes the weights");
	/* the values alone, as the host's vh_forward */
	value_head h;
	float v[B * T], hv[B * T];
	int okv = vh_init(&h, C, NULL) == 0;
	if (okv) {
		memcpy(h.w, head, C * sizeof *head);
		h.b[0] = head[C];
		vh_forward(&h, hidden, B * T, hv);
		rl_ppo_value_cpu(v, hidden, head, B * T, C);
		vh_free(&h);
	}
	ok(okv && !memcmp(v, hv, sizeof v), "values: rl_ppo_value_cpu equals vh_forward bit for bit");
	return done_testing();
}
