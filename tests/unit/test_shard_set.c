/* test_shard_set.c: the set-level commit of shards (issue 22 item 10): the
 * reader takes a prefix only through its manifest, refuses a set without
 * one (a killed run) with a message saying how to finish or redo it, and a
 * shard or manifest changed after the fact; shard-pack --seal upgrades a set
 * written before manifests; -f switches generations. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "app/shard_pack.h"
#include "data/shard.h"
#include "data/shard_reader.h"
#include "data/shard_set.h"
#include "data/tokstream.h"

static char dir[] = "/tmp/lmpipe-sset.XXXXXX";

static const char *path_in(const char *name)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

/* A token stream of docs documents of 50 ids each (eot 9), vocab 10. */
static void write_stream(const char *path, int docs, uint32_t first)
{
	FILE *fp = fopen(path, "wb");
	tokstream_writer w;
	lm_err e;
	if (!fp || tsw_open(&w, fp, path, 10, 9, &e))
		return;
	uint32_t ids[50];
	for (int d = 0; d < docs; d++) {
		for (int i = 0; i < 49; i++)
			ids[i] = (first + (uint32_t)(d + i)) % 9;
		ids[49] = 9;
		tsw_write(&w, ids, 50, &e);
	}
	tsw_close(&w, &e);
	fclose(fp);
}

static int pack(const char *prefix, const char *input, uint64_t shard_tokens, int force,
		lm_err *e)
{
	shard_pack_opts o = { .prefix = prefix, .shard_tokens = shard_tokens, .val_docs = 2,
			      .seed = 1, .level = 3, .threads = 1, .force = force };
	const char *in[] = { input };
	return shard_pack(&o, in, 1, NULL, e);
}

static long long open_tokens(const char *prefix, lm_err *e)
{
	shard_reader *r;
	sr_config cfg = { .mode = SR_SEQUENTIAL, .batch = 4, .context = 8 };
	const char *paths[] = { prefix };
	if (sr_open(&r, paths, 1, &cfg, e))
		return -1;
	long long n = (long long)sr_tokens(r);
	sr_close(r);
	return n;
}

int main(void)
{
	if (!mkdtemp(dir))
		skip_all("no scratch directory");
	lm_err e;
	char d[256], cmd[600];
	snprintf(d, sizeof d, "%s", path_in("d"));
	write_stream(path_in("a.tok"), 40, 0);
	write_stream(path_in("b.tok"), 30, 3);

	is_int(pack(d, path_in("a.tok"), 300, 0, &e), 0, "pack 40 documents");
	ok(access(path_in("d.manifest"), F_OK) == 0, "the manifest is written");
	is_int(open_tokens(d, &e), 38 * 50, "the reader takes the training part");
	snprintf(cmd, sizeof cmd, "%s-val", d);
	is_int(open_tokens(cmd, &e), 2 * 50, "and d-val the validation part");

	/* a killed run: shards without a manifest */
	rename(path_in("d.manifest"), path_in("saved.manifest"));
	is_int(open_tokens(d, &e), -1, "a set without a manifest is refused");
	ok(strstr(e.msg, "d: no manifest ") && strstr(e.msg, "redo it with shard-pack -f -o ") &&
	   strstr(e.msg, "shard-pack --seal "), "the message says how to redo or seal it: %s",
	   e.msg);
	is_int(open_tokens(cmd, &e), -1, "and so is its validation part");

	/* the upgrade path for sets written before manifests */
	is_int(shard_seal(d, &e), 0, "--seal writes the manifest of a complete set");
	is_int(open_tokens(d, &e), 38 * 50, "then the set reads");
	is_int(shard_seal(d, &e), -1, "sealing twice is refused");
	ok(strstr(e.msg, "sealed already") != NULL, "%s", e.msg);

	/* a shard replaced after the manifest was written */
	write_stream(path_in("c.tok"), 40, 5);
	is_int(pack(path_in("other"), path_in("c.tok"), 300, 0, &e), 0, "another set");
	rename(path_in("other-000001.lms"), path_in("d-000001.lms"));
	is_int(open_tokens(d, &e), -1, "a shard that differs from its entry is refused");
	ok(strstr(e.msg, "d-000001.lms: differs from its entry in ") != NULL, "%s", e.msg);

	/* -f: the next generation, the old one removed after the switch */
	is_int(pack(d, path_in("b.tok"), 300, 0, &e), -1, "without -f the set is kept");
	is_int(pack(d, path_in("b.tok"), 300, 1, &e), 0, "-f packs 30 other documents");
	is_int(open_tokens(d, &e), 28 * 50, "the reader sees the new set");
	ok(access(path_in("d.g1-000000.lms"), F_OK) == 0 &&
	   access(path_in("d-000000.lms"), F_OK) != 0 && access(path_in("d-val-000000.lms"), F_OK) != 0,
	   "under generation 1's names, generation 0 removed");
	is_int(pack(d, path_in("a.tok"), 300, 1, &e), 0, "-f again");
	ok(access(path_in("d.g2-000000.lms"), F_OK) == 0 && access(path_in("d.g1-000000.lms"), F_OK) != 0,
	   "generation 2, generation 1 removed");
	is_int(open_tokens(d, &e), 38 * 50, "the reader sees it");

	/* a damaged manifest */
	FILE *fp = fopen(path_in("d.manifest"), "r+");
	if (fp) {
		fseek(fp, 40, SEEK_SET);
		int c = fgetc(fp);
		fseek(fp, 40, SEEK_SET);
		fputc(c == '1' ? '2' : '1', fp);
		fclose(fp);
	}
	is_int(open_tokens(d, &e), -1, "a changed manifest is refused");
	ok(strstr(e.msg, "d.manifest") != NULL, "%s", e.msg);

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? done_testing() : (done_testing(), 1);
}
