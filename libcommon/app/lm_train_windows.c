/* lm_train_windows.c: lm-train --dump-windows FILE: which training windows
 * each optimizer step used, as text, so that another trainer (the PyTorch
 * parity script, bench/parity.sh) can train on the same tokens in the same
 * order.  The format is in lm-train(1), DUMPED WINDOWS:
 *
 *     lmpipe-windows 1
 *     context T
 *     batch B accum A
 *     train TOKENS PATH      (each training shard, in the reader's order)
 *     val TOKENS PATH        (each validation shard, in order)
 *     step N O1 ... O(B*A)   (one line per step: the windows' offsets)
 *
 * Paths are absolute.  An offset is where the window of T + 1 tokens starts in the training
 * shards concatenated in the order listed (sr_window_offset).  The file
 * appears when the run ends (or stops on a signal), whole. */
#define _XOPEN_SOURCE 700
#include "app/lm_train_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int list_shards(FILE *fp, const char *part, const shard_reader *r, lm_err *e)
{
	for (size_t i = 0; i < sr_shards(r); i++) {
		char *abs = realpath(sr_shard_path(r, i), NULL);
		const char *p = abs ? abs : sr_shard_path(r, i);
		int bad = strchr(p, '\n') != NULL;
		if (!bad)
			fprintf(fp, "%s %" PRIu64 " %s\n", part, sr_shard_tokens(r, i), p);
		free(abs);
		if (bad)
			return lm_usage_err(e, "--dump-windows: a shard's path holds a newline");
	}
	return 0;
}

int train_windows_open(train_windows *w, const char *path, const shard_reader *data,
		       const shard_reader *val, int B, int T, int accum, lm_err *e)
{
	if (atomic_open(&w->af, path, e))
		return -1;
	w->on = 1;
	fprintf(w->af.fp, "lmpipe-windows 1\ncontext %d\nbatch %d accum %d\n", T, B, accum);
	if (list_shards(w->af.fp, "train", data, e) || (val && list_shards(w->af.fp, "val", val, e))) {
		train_windows_abort(w);
		return -1;
	}
	return 0;
}

int train_windows_step(train_windows *w, long long step, const shard_reader *data,
		       uint64_t first, uint64_t n, lm_err *e)
{
	if (!w->on)
		return 0;
	fprintf(w->af.fp, "step %lld", step);
	for (uint64_t k = first; k < first + n; k++)
		fprintf(w->af.fp, " %" PRIu64, sr_window_offset(data, k));
	if (fputc('\n', w->af.fp) == EOF || ferror(w->af.fp))
		return lm_seterr(e, "%s: write error:", w->af.path);
	return 0;
}

int train_windows_commit(train_windows *w, lm_err *e)
{
	if (!w->on)
		return 0;
	w->on = 0;
	return atomic_commit(&w->af, e);
}

void train_windows_abort(train_windows *w)
{
	if (w->on)
		atomic_abort(&w->af);
	w->on = 0;
}
