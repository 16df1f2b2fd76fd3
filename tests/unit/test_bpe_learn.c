/* test_bpe_learn.c: BPE training through the library API.
 *   - CS336 exactness: corpus.en, vocab 500, <|endoftext|> against the
 *     reference merges (in order) and vocabulary (as sets); skipped without
 *     ../shared/data;
 *   - a multilingual text against a naive recount-everything trainer written
 *     here (an independent reference), and so are forty small random
 *     corpora of two or three letters, on one thread and on two;
 *   - merging on threads: the same merges on 1, 2, 3 and 8 threads, on words
 *     numerous enough for the parallel rewrite (and with runs like "aaaa"
 *     and "abab" where a merge meets itself);
 *   - counting: one thread = several threads = tiny streamed pieces = counts
 *     saved, loaded and merged. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "base/io.h"
#include "learn/bpe_learn.h"
#include "text/pretok.h"

static void tok_free(bpe_tokenizer *t)
{
	free(t->bytes);
	free(t->off);
	free(t->merges);
	free(t->special);
	memset(t, 0, sizeof *t);
}

static const uint8_t EOT[] = "<|endoftext|>";

static bpe_specials one_special(void)
{
	static const uint8_t *s[] = { EOT };
	static const size_t len[] = { sizeof EOT - 1 };
	return (bpe_specials){ 1, s, len };
}

/* ---- GPT-2 byte-to-unicode strings ---- */

static int printable(int b)
{
	return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* Decode a GPT-2 unicode string (UTF-8) into bytes; returns the length. */
static size_t gpt2_decode(const char *s, uint8_t *out)
{
	int other[256], n_other = 0;
	for (int b = 0; b < 256; b++)
		if (!printable(b))
			other[n_other++] = b;
	size_t o = 0;
	for (const uint8_t *p = (const uint8_t *)s; *p;) {
		uint32_t cp;
		if (*p < 0x80) {
			cp = *p++;
		} else if ((*p & 0xE0) == 0xC0) {
			cp = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
			p += 2;
		} else {
			cp = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
			p += 3;
		}
		out[o++] = (uint8_t)(cp < 256 ? cp : (uint32_t)other[cp - 256]);
	}
	return o;
}

typedef struct bstr {
	size_t n;
	uint8_t b[64];
} bstr;

static int bstr_cmp(const void *x, const void *y)
{
	const bstr *a = x, *b = y;
	int r = memcmp(a->b, b->b, a->n < b->n ? a->n : b->n);
	return r ? r : (a->n > b->n) - (a->n < b->n);
}

static bstr tok(const bpe_tokenizer *t, uint32_t id)
{
	bstr s = { 0, { 0 } };
	s.n = bpe_token_len(t, id);
	if (s.n > sizeof s.b)
		s.n = sizeof s.b;
	memcpy(s.b, bpe_token_bytes(t, id), s.n);
	return s;
}

static void cs336(void)
{
	const char *d = tap_data_dir();
	if (!d) {
		ok(1, "# SKIP CS336 exactness: needs ../shared/data");
		return;
	}
	char path[4096];
	uint8_t *text;
	size_t n;
	lm_err e;
	snprintf(path, sizeof path, "%s/cs336-a1/fixtures/corpus.en", d);
	if (!ok(io_read_file(path, &text, &n, &e) == 0, "read corpus.en"))
		return;
	bpe_specials sp = one_special();
	bpe_counts *c = bpe_counts_new(&e);
	bpe_count_opts o = { 2, 0, NULL, NULL };
	bpe_tokenizer t;
	ok(bpe_count_text(c, text, n, &sp, &o, &e) == 0, "count corpus.en");
	ok(bpe_learn(c, 500, &sp, NULL, NULL, &t, &e) == 0, "learn vocab 500");
	is_int(t.n_vocab, 500, "500 ids");
	is_int(t.n_merges, 243, "243 merges");

	snprintf(path, sizeof path, "%s/cs336-a1/fixtures/train-bpe-reference-merges.txt", d);
	FILE *fp = fopen(path, "r");
	char line[512];
	uint32_t i = 0, bad = 0;
	while (fp && fgets(line, sizeof line, fp)) {
		line[strcspn(line, "\n")] = 0;
		char *sp2 = strchr(line, ' ');
		if (!sp2)
			continue;
		*sp2 = 0;
		bstr l = { 0, { 0 } }, r = { 0, { 0 } };
		l.n = gpt2_decode(line, l.b);
		r.n = gpt2_decode(sp2 + 1, r.b);
		if (i >= t.n_merges)
			bad++;
		else {
			bstr ml = tok(&t, t.merges[i].left), mr = tok(&t, t.merges[i].right);
			if (bstr_cmp(&l, &ml) || bstr_cmp(&r, &mr)) {
				if (!bad)
					diag("first different merge: %u", i);
				bad++;
			}
		}
		i++;
	}
	if (fp)
		fclose(fp);
	ok(i == t.n_merges && bad == 0, "merges equal the reference in order (%u lines, %u differ)",
	   i, bad);

	snprintf(path, sizeof path, "%s/cs336-a1/fixtures/train-bpe-reference-vocab.json", d);
	json_t *v = json_load_file(path, 0, NULL);
	if (ok(v && json_is_object(v), "reference vocab loads")) {
		size_t nv = json_object_size(v), k = 0;
		bstr *ref = calloc(nv, sizeof *ref), *ours = calloc(t.n_vocab, sizeof *ours);
		char *seen = calloc(nv + 1, 1);
		int ids_ok = nv == t.n_vocab;
		const char *key;
		json_t *val;
		json_object_foreach(v, key, val) {
			ref[k].n = gpt2_decode(key, ref[k].b);
			json_int_t id = json_integer_value(val);
			if (id < 0 || (size_t)id >= nv || seen[id])
				ids_ok = 0;
			else
				seen[id] = 1;
			k++;
		}
		for (uint32_t j = 0; j < t.n_vocab; j++)
			ours[j] = tok(&t, j);
		qsort(ref, nv, sizeof *ref, bstr_cmp);
		qsort(ours, t.n_vocab, sizeof *ours, bstr_cmp);
		int same = nv == t.n_vocab;
		for (size_t j = 0; same && j < nv; j++)
			same = !bstr_cmp(&ref[j], &ours[j]);
		ok(ids_ok, "ids are the same set (0..%zu)", nv - 1);
		ok(same, "vocabulary equals the reference as a set of byte strings");
		free(ref);
		free(ours);
		free(seen);
	}
	json_decref(v);

	int leak = 0;
	for (uint32_t j = 1; j < t.n_vocab; j++) {
		const uint8_t *b = bpe_token_bytes(&t, j);
		for (size_t q = 0; q + 1 < bpe_token_len(&t, j); q++)
			leak |= b[q] == '<' && b[q + 1] == '|';
	}
	ok(!leak, "no learned token but the special contains '<|'");
	is_int(t.eot, 0, "<|endoftext|> is id 0");
	tok_free(&t);
	bpe_counts_free(c);
	free(text);
}

/* ---- a naive trainer: recount every pair after every merge ---- */

enum { NAIVE_MAX_WORDS = 4096, NAIVE_MAX_LEN = 256, NAIVE_MAX_VOCAB = 1024 };

typedef struct naive {
	uint32_t w[NAIVE_MAX_WORDS][NAIVE_MAX_LEN], len[NAIVE_MAX_WORDS];
	uint64_t cnt[NAIVE_MAX_WORDS];
	size_t n;
	bstr v[NAIVE_MAX_VOCAB];
	uint32_t nv;
} naive;

static void naive_word(const uint8_t *s, size_t n, uint64_t count, void *arg)
{
	naive *N = arg;
	if (N->n >= NAIVE_MAX_WORDS || n > NAIVE_MAX_LEN)
		return;
	for (size_t i = 0; i < n; i++)
		N->w[N->n][i] = 1 + s[i]; /* one special first */
	N->len[N->n] = (uint32_t)n;
	N->cnt[N->n++] = count;
}

/* Fills merges[][2] with byte strings of each merge; returns how many. */
static uint32_t naive_train(naive *N, const bpe_counts *c, uint32_t vocab, bstr (*m)[2])
{
	N->n = 0;
	bpe_counts_each(c, naive_word, N);
	N->nv = 257;
	N->v[0].n = sizeof EOT - 1;
	memcpy(N->v[0].b, EOT, N->v[0].n);
	for (int b = 0; b < 256; b++)
		N->v[1 + b] = (bstr){ 1, { (uint8_t)b } };
	uint32_t nm = 0;
	static uint64_t cnt[NAIVE_MAX_VOCAB][NAIVE_MAX_VOCAB];
	while (N->nv < vocab) {
		for (size_t w = 0; w < N->n; w++)
			for (uint32_t i = 0; i + 1 < N->len[w]; i++)
				cnt[N->w[w][i]][N->w[w][i + 1]] += N->cnt[w];
		uint32_t ba = 0, bb = 0;
		uint64_t best = 0;
		for (size_t w = 0; w < N->n; w++)
			for (uint32_t i = 0; i + 1 < N->len[w]; i++) {
				uint32_t a = N->w[w][i], b = N->w[w][i + 1];
				int r = cnt[a][b] > best ? 1 : cnt[a][b] < best ? -1 :
					bstr_cmp(&N->v[a], &N->v[ba]) ? bstr_cmp(&N->v[a], &N->v[ba]) :
					bstr_cmp(&N->v[b], &N->v[bb]);
				if (r > 0) {
					best = cnt[a][b];
					ba = a;
					bb = b;
				}
			}
		for (size_t w = 0; w < N->n; w++)
			for (uint32_t i = 0; i + 1 < N->len[w]; i++)
				cnt[N->w[w][i]][N->w[w][i + 1]] = 0;
		if (!best)
			break;
		uint32_t nc = N->nv++;
		N->v[nc].n = N->v[ba].n + N->v[bb].n;
		memcpy(N->v[nc].b, N->v[ba].b, N->v[ba].n);
		memcpy(N->v[nc].b + N->v[ba].n, N->v[bb].b, N->v[bb].n);
		m[nm][0] = N->v[ba];
		m[nm++][1] = N->v[bb];
		for (size_t w = 0; w < N->n; w++) {
			uint32_t o = 0;
			for (uint32_t i = 0; i < N->len[w];) {
				if (i + 1 < N->len[w] && N->w[w][i] == ba && N->w[w][i + 1] == bb) {
					N->w[w][o++] = nc;
					i += 2;
				} else {
					N->w[w][o++] = N->w[w][i++];
				}
			}
			N->len[w] = o;
		}
	}
	return nm;
}

static const char MULTI[] =
	"The quick brown fox jumps over the lazy dog. The dog didn't care; it's lazy.\n"
	"Le renard brun rapide saute par-dessus le chien paresseux. Ça va, l'été?\n"
	"Быстрая коричневая лиса прыгает через ленивую собаку. Собака спит.\n"
	"敏捷的棕色狐狸跳过了懒狗。狐狸很快，狗很懒。\n"
	"Σήμερα είναι 12/03/2024 και η ώρα 10:45. Αριθμοί: ٣٤٥ ५६७ ⅫⅫ ½½.\n"
	"Emoji 😀😀😀 👍🏽👍🏽 🇫🇷 and tabs\t\tand  double  spaces   triple\r\n"
	"<|endoftext|>The end... the END. the end!\n\n\n   trailing   \n"
	"aaaaaaaaaaaaaaaa abababababab the the the thethe 1000000 2000000\n";

static void versus_naive(void)
{
	static naive N;
	static bstr m[NAIVE_MAX_VOCAB][2];
	lm_err e;
	bpe_specials sp = one_special();
	bpe_counts *c = bpe_counts_new(&e);
	bpe_count_opts o = { 1, 0, NULL, NULL };
	size_t n = sizeof MULTI - 1;
	ok(bpe_count_text(c, (const uint8_t *)MULTI, n, &sp, &o, &e) == 0, "count multilingual text");
	const uint32_t vocabs[] = { 300, 420, 700 };
	for (size_t k = 0; k < sizeof vocabs / sizeof vocabs[0]; k++) {
		bpe_tokenizer t;
		uint32_t nm = naive_train(&N, c, vocabs[k], m);
		ok(bpe_learn(c, vocabs[k], &sp, NULL, NULL, &t, &e) == 0, "learn vocab %u", vocabs[k]);
		int same = t.n_merges == nm;
		for (uint32_t i = 0; same && i < nm; i++) {
			bstr l = tok(&t, t.merges[i].left), r = tok(&t, t.merges[i].right);
			same = !bstr_cmp(&l, &m[i][0]) && !bstr_cmp(&r, &m[i][1]);
			if (!same)
				diag("merge %u differs", i);
		}
		ok(same, "vocab %u: %u merges equal the naive trainer's %u", vocabs[k], t.n_merges, nm);
		tok_free(&t);
	}
	bpe_counts_free(c);
}

/* Many small random corpora over two or three letters, where merges meet
 * themselves and their neighbours in every way ("abab", "aaa", "cab" after
 * "ab"), against the naive trainer: on one thread, and on two with every
 * merge of two words or more parallel. */
static void random_versus_naive(void)
{
	static naive N;
	static bstr m[NAIVE_MAX_VOCAB][2];
	lm_err e;
	bpe_specials sp = one_special();
	uint64_t x = 0x9E3779B97F4A7C15ull;
	int bad = 0, runs = 0;
	for (int trial = 0; trial < 40; trial++) {
		bpe_counts *c = bpe_counts_new(&e);
		const char *alpha = trial % 2 ? "abc" : "ab";
		size_t na = strlen(alpha);
		char w[20];
		int words = 20 + trial * 7;
		for (int i = 0; i < words; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			size_t n = 1 + x % 19;
			for (size_t k = 0; k < n; k++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				w[k] = alpha[x % na];
			}
			bpe_counts_add(c, (const uint8_t *)w, n, 1 + x % 5, &e);
		}
		uint32_t vocab = 257 + 10 + (uint32_t)(trial % 5) * 15;
		uint32_t nm = naive_train(&N, c, vocab, m);
		for (int how = 0; how < 2; how++) {
			if (how)
				setenv("LMPIPE_BPE_PAR_WORDS", "1", 1);
			bpe_tokenizer t;
			int rc = bpe_learn_threads(c, vocab, &sp, how ? 2 : 1, NULL, NULL, &t, &e);
			int same = rc == 0 && t.n_merges == nm;
			for (uint32_t i = 0; same && i < nm; i++) {
				bstr l = tok(&t, t.merges[i].left), r = tok(&t, t.merges[i].right);
				same = !bstr_cmp(&l, &m[i][0]) && !bstr_cmp(&r, &m[i][1]);
			}
			if (!same && bad++ < 3)
				diag("trial %d (%s, vocab %u, %s): differs from the naive trainer", trial,
				     alpha, vocab, how ? "2 threads, all parallel" : "1 thread");
			runs++;
			if (rc == 0)
				tok_free(&t);
			unsetenv("LMPIPE_BPE_PAR_WORDS");
		}
		bpe_counts_free(c);
	}
	ok(bad == 0, "%d runs on random corpora of two or three letters equal the naive trainer "
	   "(%d differ)", runs, bad);
}

/* ---- counting: threads, streaming pieces, counts files ---- */

typedef struct dump {
	bstr *v;
	uint64_t *cnt;
	size_t n;
} dump;

static void dump_one(const uint8_t *s, size_t n, uint64_t count, void *arg)
{
	dump *d = arg;
	d->v[d->n].n = n < 63 ? n : 63;
	memcpy(d->v[d->n].b, s, d->v[d->n].n);
	d->v[d->n].b[63] = (uint8_t)(count % 251);
	d->cnt[d->n++] = count;
}

static int bstr_cmp_count(const void *x, const void *y)
{
	const bstr *a = x, *b = y;
	int r = bstr_cmp(a, b);
	return r ? r : (int)a->b[63] - (int)b->b[63];
}

/* Whether two count tables hold the same pre-tokens with the same counts. */
static int same_counts(const bpe_counts *x, const bpe_counts *y)
{
	if (bpe_counts_size(x) != bpe_counts_size(y) || bpe_counts_total(x) != bpe_counts_total(y))
		return 0;
	size_t n = bpe_counts_size(x);
	dump a = { calloc(n + 1, sizeof(bstr)), calloc(n + 1, 8), 0 };
	dump b = { calloc(n + 1, sizeof(bstr)), calloc(n + 1, 8), 0 };
	bpe_counts_each(x, dump_one, &a);
	bpe_counts_each(y, dump_one, &b);
	qsort(a.v, n, sizeof(bstr), bstr_cmp_count);
	qsort(b.v, n, sizeof(bstr), bstr_cmp_count);
	int same = 1;
	for (size_t i = 0; same && i < n; i++)
		same = !bstr_cmp_count(&a.v[i], &b.v[i]);
	free(a.v);
	free(a.cnt);
	free(b.v);
	free(b.cnt);
	return same;
}

static void counting(void)
{
	lm_err e;
	/* a text with many pieces: repeat MULTI with variations */
	size_t reps = 200, n = 0;
	uint8_t *text = malloc(reps * (sizeof MULTI + 16));
	for (size_t r = 0; r < reps; r++) {
		n += (size_t)sprintf((char *)text + n, "%zu", r * 7919 % 1000);
		memcpy(text + n, MULTI + r % 50, sizeof MULTI - 1 - r % 50);
		n += sizeof MULTI - 1 - r % 50;
	}
	bpe_specials sp = one_special();
	bpe_counts *one = bpe_counts_new(&e), *two = bpe_counts_new(&e), *str = bpe_counts_new(&e);
	bpe_count_opts o1 = { 1, 0, NULL, NULL }, o2 = { 2, 97, NULL, NULL }, o3 = { 3, 13, NULL, NULL };
	ok(bpe_count_text(one, text, n, &sp, &o1, &e) == 0, "count with 1 thread");
	ok(bpe_count_text(two, text, n, &sp, &o2, &e) == 0, "count with 2 threads, 97-byte pieces");
	ok(same_counts(one, two), "2 threads count the same as 1");
	FILE *fp = fmemopen(text, n, "r");
	uint64_t bytes = 0;
	ok(bpe_count_stream(str, fp, "<mem>", &sp, &o3, &bytes, &e) == 0,
	   "stream with 3 threads, 13-byte pieces");
	fclose(fp);
	is_int(bytes, n, "stream read every byte");
	ok(same_counts(one, str), "streamed small pieces count the same");

	/* counts files: two halves, cut at a special, loaded and merged */
	char dir[] = "/tmp/lmpipe-bpec.XXXXXX", p1[256], p2[256];
	ok(mkdtemp(dir) != NULL, "scratch directory");
	snprintf(p1, sizeof p1, "%s/a.counts", dir);
	snprintf(p2, sizeof p2, "%s/b.counts", dir);
	const uint8_t *cut = memmem(text + n / 2, n - n / 2, EOT, sizeof EOT - 1);
	size_t h = (size_t)(cut - text);
	bpe_counts *a = bpe_counts_new(&e), *b = bpe_counts_new(&e), *ab = bpe_counts_new(&e);
	bpe_count_text(a, text, h, &sp, &o1, &e);
	bpe_count_text(b, text + h, n - h, &sp, &o1, &e);
	ok(bpe_counts_save(a, &sp, p1, &e) == 0 && bpe_counts_save(b, &sp, p2, &e) == 0,
	   "save two counts files");
	ok(bpe_counts_load(ab, &sp, p1, &e) == 0 && bpe_counts_load(ab, &sp, p2, &e) == 0,
	   "load and merge them");
	ok(same_counts(one, ab), "merged halves count the same as the whole");
	bpe_specials none = { 0, NULL, NULL };
	bpe_counts *x = bpe_counts_new(&e);
	ok(bpe_counts_load(x, &none, p1, &e) == -1 && strstr(e.msg, "special"),
	   "a counts file made with other specials is refused: %s", e.msg);
	FILE *tr = fopen(p2, "r+");
	if (tr) {
		fseek(tr, 0, SEEK_END);
		long len = ftell(tr);
		fclose(tr);
		ok(truncate(p2, len - 3) == 0, "truncate a counts file");
	}
	ok(bpe_counts_load(x, &sp, p2, &e) == -1, "a truncated counts file is refused: %s", e.msg);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
	bpe_counts_free(one);
	bpe_counts_free(two);
	bpe_counts_free(str);
	bpe_counts_free(a);
	bpe_counts_free(b);
	bpe_counts_free(ab);
	bpe_counts_free(x);
	free(text);
}

/* Overlapping specials: the leftmost occurrence wins, then the longest;
 * the same with every piece size, streamed. */
static void overlapping_specials(void)
{
	static const uint8_t *s[] = { (const uint8_t *)"bc", (const uint8_t *)"abcd",
				      (const uint8_t *)"<|a|>", (const uint8_t *)"<|a|><|b|>" };
	static const size_t len[] = { 2, 4, 5, 10 };
	bpe_specials sp = { 4, s, len };
	static const char text[] = "zabcdz bcq <|a|><|b|>y <|a|>w";
	/* pieces: "z" "z" " " "q " "y " "w" -> pre-tokens z z, " ", q, " ", y, " ", w */
	lm_err e;
	bpe_counts *want = bpe_counts_new(&e);
	const char *toks[] = { "z", "z", " ", "q", " ", "y", " ", "w" };
	for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++)
		bpe_counts_add(want, (const uint8_t *)toks[i], strlen(toks[i]), 1, &e);
	bpe_count_opts o = { 1, 0, NULL, NULL };
	bpe_counts *c = bpe_counts_new(&e);
	ok(bpe_count_text(c, (const uint8_t *)text, sizeof text - 1, &sp, &o, &e) == 0 &&
	   same_counts(c, want), "overlapping specials: leftmost, then longest, wins");
	int all = 1;
	for (size_t chunk = 1; chunk < sizeof text; chunk++) {
		bpe_counts *x = bpe_counts_new(&e);
		bpe_count_opts oc = { 2, chunk, NULL, NULL };
		FILE *fp = fmemopen((void *)text, sizeof text - 1, "r");
		uint64_t bytes;
		all &= bpe_count_stream(x, fp, "<mem>", &sp, &oc, &bytes, &e) == 0 && same_counts(x, want);
		fclose(fp);
		bpe_counts_free(x);
	}
	ok(all, "overlapping specials: the same streamed in pieces of every size");
	bpe_counts_free(c);
	bpe_counts_free(want);
}

static void bad_args(void)
{
	lm_err e;
	bpe_tokenizer t;
	bpe_counts *c = bpe_counts_new(&e);
	bpe_specials sp = one_special();
	ok(bpe_learn(c, 256, &sp, NULL, NULL, &t, &e) == -1 && e.code == 2,
	   "vocab 256 with one special is a usage error: %s", e.msg);
	static const uint8_t *es[] = { (const uint8_t *)"" };
	static const size_t el[] = { 0 };
	bpe_specials empty = { 1, es, el };
	ok(bpe_learn(c, 300, &empty, NULL, NULL, &t, &e) == -1 && e.code == 2,
	   "an empty special is a usage error: %s", e.msg);
	ok(bpe_learn(c, 300, &sp, NULL, NULL, &t, &e) == 0 && t.n_vocab == 257,
	   "no text: only the bytes and the special");
	tok_free(&t);
	bpe_counts_free(c);
}

/* Words over a small alphabet, so that the first pairs occur in thousands
 * of words (past the parallel threshold), with random counts. */
static void threads_same(void)
{
	lm_err e;
	bpe_specials sp = one_special();
	bpe_counts *c = bpe_counts_new(&e);
	uint64_t x = 88172645463325252ull;
	const char alpha[] = "aabbcde ";
	char w[24];
	int added = 0;
	for (int i = 0; i < 30000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t n = 2 + x % 14;
		for (size_t k = 0; k < n; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			w[k] = alpha[x % (sizeof alpha - 1)];
		}
		added += bpe_counts_add(c, (const uint8_t *)w, n, 1 + x % 97, &e) == 0;
	}
	static const char *const runs[] = { "aaaaaaaa", "abababab", "aaabaaab", "bbbbbbbbb" };
	for (int i = 0; i < 4; i++)
		added += bpe_counts_add(c, (const uint8_t *)runs[i], strlen(runs[i]), 5000, &e) == 0;
	ok(added == 30004, "30004 words of a small alphabet");
	bpe_tokenizer t1;
	ok(bpe_learn_threads(c, 2000, &sp, 1, NULL, NULL, &t1, &e) == 0, "learn vocab 2000, 1 thread");
	const int threads[] = { 2, 3, 8 };
	for (int k = 0; k < 3; k++) {
		bpe_tokenizer t;
		ok(bpe_learn_threads(c, 2000, &sp, threads[k], NULL, NULL, &t, &e) == 0,
		   "learn vocab 2000, %d threads", threads[k]);
		int same = t.n_merges == t1.n_merges && t.n_vocab == t1.n_vocab &&
			   !memcmp(t.merges, t1.merges, t.n_merges * sizeof *t.merges);
		ok(same, "%d threads: the same %u merges as 1 thread", threads[k], t1.n_merges);
		tok_free(&t);
	}
	/* every merge of two words or more on threads (LMPIPE_BPE_PAR_WORDS=1),
	 * the pairs created by a merge from several threads' tables */
	setenv("LMPIPE_BPE_PAR_WORDS", "1", 1);
	for (int k = 0; k < 3; k++) {
		bpe_tokenizer t;
		ok(bpe_learn_threads(c, 2000, &sp, threads[k], NULL, NULL, &t, &e) == 0,
		   "every merge parallel: learn vocab 2000, %d threads", threads[k]);
		int same = t.n_merges == t1.n_merges && t.n_vocab == t1.n_vocab &&
			   !memcmp(t.merges, t1.merges, t.n_merges * sizeof *t.merges);
		ok(same, "every merge parallel, %d threads: the same %u merges as 1 thread",
		   threads[k], t1.n_merges);
		tok_free(&t);
	}
	unsetenv("LMPIPE_BPE_PAR_WORDS");
	tok_free(&t1);
	bpe_counts_free(c);
}

int main(void)
{
	cs336();
	versus_naive();
	random_versus_naive();
	threads_same();
	counting();
	overlapping_specials();
	bad_args();
	return done_testing();
}
