/* muon_ref.h: what tests/unit/test_muon.c and tests/gpu/test_backend.c share
 * about tests/data/muon_ref.safetensors (made by tests/gen/muon_ref.py):
 * the shapes, the two scalings and their hyper-parameters, read from the
 * file's __metadata__ so that a regenerated file with other values is
 * followed, not silently compared against stale constants. */
#ifndef LMPIPE_MUON_REF_H
#define LMPIPE_MUON_REF_H

#include <stdlib.h>
#include <string.h>

#include "kernels/muon.h"
#include "st_read.h"

#define MUON_REF_FILE "tests/data/muon_ref.safetensors"
enum { MUON_REF_SHAPES = 4, MUON_REF_FNS = 2 };

static const struct { const char *name; int rows, cols; } muon_ref_shapes[MUON_REF_SHAPES] = {
	{ "sq32", 32, 32 }, { "wide16x48", 16, 48 }, { "tall48x16", 48, 16 }, { "tall40x24", 40, 24 },
};
static const struct { const char *name; muon_scale scale; } muon_ref_fns[MUON_REF_FNS] = {
	{ "original", MUON_SCALE_ORIGINAL }, { "match_rms_adamw", MUON_SCALE_MATCH_RMS_ADAMW },
};

/* A number stored as a metadata string ("key":"value"); NAN if absent. */
static inline double muon_ref_meta(const st_file *f, const char *key)
{
	char k[160];
	snprintf(k, sizeof k, "\"%.120s\":\"", key);
	const char *at = strstr(f->json, k);
	return at ? strtod(at + strlen(k), NULL) : NAN;
}

/* The hyper-parameters of scaling fn, from the file. */
static inline muon_hparams muon_ref_hparams(const st_file *f, int fn)
{
	char k[100];
	muon_hparams h = { 0 };
	snprintf(k, sizeof k, "%.60s.lr", muon_ref_fns[fn].name);
	h.lr = (float)muon_ref_meta(f, k);
	snprintf(k, sizeof k, "%.60s.weight_decay", muon_ref_fns[fn].name);
	h.weight_decay = (float)muon_ref_meta(f, k);
	h.momentum = (float)muon_ref_meta(f, "momentum");
	h.nesterov = 1;
	h.ns_steps = (int)muon_ref_meta(f, "ns_steps");
	h.scale = muon_ref_fns[fn].scale;
	return h;
}

/* |a - b|_F / |b|_F over n values. */
static inline double muon_rel(const float *a, const float *b, size_t n)
{
	double d = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		r += (double)b[i] * b[i];
	}
	return r > 0 ? sqrt(d / r) : sqrt(d);
}

#endif
