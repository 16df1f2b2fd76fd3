/* bpe.c: lmpipe's tokenizer file (man 5 lmpipe-tokenizer): loading with
 * strict checks, saving whole or nothing; adding special tokens.
 *
 * The file is text, one record a line:
 *   lmpipe-tokenizer 1
 *   pretokenizer gpt2
 *   tokens N
 *   specials S
 *   merges M
 *   t ID "BYTES"        N lines, ids 0..N-1 in order
 *   s ID                S lines: these tokens are special
 *   m "LEFT" "RIGHT"    M lines in rank order
 *   end
 * BYTES is quoted: printable ASCII as is, well-formed UTF-8 as is, \\ \"
 * \n \t \r, and \xHH for any other byte, so any byte string is exact. */
#include "tok/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/io.h"
#include "tok/bpe_build.h"

#define TOK_MAGIC "lmpipe-tokenizer"
enum { TOK_VERSION = 1, HEX_DIGITS = 2 };

void bpe_free(bpe_tokenizer *t)
{
	if (!t)
		return;
	free(t->bytes);
	free(t->off);
	free(t->merges);
	free(t->special);
	memset(t, 0, sizeof *t);
	t->eot = BPE_NO_TOKEN;
}

/* ---- writing ---- */

/* (fp locked by the caller: a tokenizer is ~300 K characters, and a lock
 * taken for each cost as much as the rest of writing it) */
static void put_quoted(FILE *fp, const uint8_t *s, size_t len)
{
	uint32_t cp;
	putc_unlocked('"', fp);
	for (size_t i = 0; i < len;) {
		uint8_t c = s[i];
		size_t n;
		if (c == '\\' || c == '"') {
			putc_unlocked('\\', fp);
			putc_unlocked(c, fp);
			i++;
		} else if (c == '\n' || c == '\t' || c == '\r') {
			putc_unlocked('\\', fp);
			putc_unlocked(c == '\n' ? 'n' : c == '\t' ? 't' : 'r', fp);
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			putc_unlocked(c, fp);
			i++;
		} else if (c >= 0x80 && (n = bb_utf8_char(s + i, len - i, &cp)) > 0) {
			fwrite(s + i, 1, n, fp);
			i += n;
		} else {
			fprintf(fp, "\\x%02x", c);
			i++;
		}
	}
	putc_unlocked('"', fp);
}

static int check_for_save(const bpe_tokenizer *t, lm_err *e)
{
	if (!t->off || !t->bytes || t->n_vocab == 0)
		return lm_seterr(e, "empty tokenizer");
	for (uint32_t i = 0; i < t->n_special; i++)
		if (t->special[i] >= t->n_vocab)
			return lm_seterr(e, "special token id %u outside the vocabulary", t->special[i]);
	for (uint32_t i = 0; i < t->n_merges; i++)
		if (t->merges[i].left >= t->n_vocab || t->merges[i].right >= t->n_vocab)
			return lm_seterr(e, "merge %u uses an id outside the vocabulary", i);
	return 0;
}

int bpe_save(const bpe_tokenizer *t, const char *path, lm_err *e)
{
	atomic_file af;
	if (check_for_save(t, e) || atomic_open(&af, path, e))
		return lm_err_prefix(e, "%s", path);
	FILE *fp = af.fp;
	flockfile(fp);
	fprintf(fp, "%s %d\npretokenizer %s\ntokens %u\nspecials %u\nmerges %u\n", TOK_MAGIC,
		TOK_VERSION, t->pretokenizer[0] ? t->pretokenizer : "gpt2", t->n_vocab, t->n_special, t->n_merges);
	for (uint32_t i = 0; i < t->n_vocab; i++) {
		fprintf(fp, "t %u ", i);
		put_quoted(fp, bpe_token_bytes(t, i), bpe_token_len(t, i));
		putc_unlocked('\n', fp);
	}
	for (uint32_t i = 0; i < t->n_special; i++)
		fprintf(fp, "s %u\n", t->special[i]);
	for (uint32_t i = 0; i < t->n_merges; i++) {
		putc_unlocked('m', fp);
		putc_unlocked(' ', fp);
		put_quoted(fp, bpe_token_bytes(t, t->merges[i].left), bpe_token_len(t, t->merges[i].left));
		putc_unlocked(' ', fp);
		put_quoted(fp, bpe_token_bytes(t, t->merges[i].right), bpe_token_len(t, t->merges[i].right));
		putc_unlocked('\n', fp);
	}
	fputs("end\n", fp);
	funlockfile(fp);
	if (ferror(fp)) {
		atomic_abort(&af);
		return lm_seterr(e, "%s: write error", path);
	}
	return atomic_commit(&af, e);
}

/* ---- reading ---- */

typedef struct lines {
	const char *path;
	uint8_t *buf;
	size_t len, pos, lineno;
	const uint8_t *line;   /* current line, without its '\n' */
	size_t line_len;
} lines;

/* Next line; 0 at end of file.  A last line without '\n' is a truncated
 * file. */
static int next_line(lines *L, lm_err *e)
{
	if (L->pos >= L->len)
		return 0;
	L->lineno++;
	L->line = L->buf + L->pos;
	uint8_t *nl = memchr(L->line, '\n', L->len - L->pos);
	if (!nl)
		return lm_seterr(e, "%s:%zu: truncated (no newline at the end of the file)", L->path, L->lineno);
	L->line_len = (size_t)(nl - L->line);
	L->pos += L->line_len + 1;
	return 1;
}

static int need_line(lines *L, const char *what, lm_err *e)
{
	int r = next_line(L, e);
	if (r == 0)
		return lm_seterr(e, "%s:%zu: truncated: expected %s", L->path, L->lineno + 1, what);
	return r < 0 ? -1 : 0;
}

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse a quoted string at s[*i..n) into out (capacity >= n); *i moves past
 * the closing quote. */
static int get_quoted(const uint8_t *s, size_t n, size_t *i, uint8_t *out, size_t *olen, lm_err *e)
{
	size_t p = *i, o = 0;
	if (p >= n || s[p] != '"')
		return lm_seterr(e, "expected a quoted string");
	for (p++; p < n && s[p] != '"'; p++) {
		if (s[p] != '\\') {
			out[o++] = s[p];
			continue;
		}
		if (++p >= n)
			break;
		switch (s[p]) {
		case '\\': out[o++] = '\\'; break;
		case '"': out[o++] = '"'; break;
		case 'n': out[o++] = '\n'; break;
		case 't': out[o++] = '\t'; break;
		case 'r': out[o++] = '\r'; break;
		case 'x': {
			int h = p + HEX_DIGITS < n ? hexval(s[p + 1]) : -1;
			int l = h >= 0 ? hexval(s[p + 2]) : -1;
			if (l < 0)
				return lm_seterr(e, "bad \\x escape (want two hex digits)");
			out[o++] = (uint8_t)(h << 4 | l);
			p += HEX_DIGITS;
			break;
		}
		default:
			return lm_seterr(e, "unknown escape \\%c", s[p] >= 0x20 && s[p] < 0x7f ? s[p] : '?');
		}
	}
	if (p >= n)
		return lm_seterr(e, "unterminated quoted string");
	*i = p + 1;
	*olen = o;
	return 0;
}

/* "KEY VALUE" with VALUE a decimal u32. */
static int get_count(lines *L, const char *key, uint32_t *v, lm_err *e)
{
	char buf[64], k[32];
	unsigned long long x;
	char extra;
	if (need_line(L, key, e))
		return -1;
	if (L->line_len >= sizeof buf)
		return lm_seterr(e, "%s:%zu: expected \"%s N\"", L->path, L->lineno, key);
	memcpy(buf, L->line, L->line_len);
	buf[L->line_len] = 0;
	if (sscanf(buf, "%31s %llu %c", k, &x, &extra) != 2 || strcmp(k, key) || x >= BPE_NO_TOKEN ||
	    buf[strlen(key) + 1] < '0' || buf[strlen(key) + 1] > '9')
		return lm_seterr(e, "%s:%zu: expected \"%s N\"", L->path, L->lineno, key);
	*v = (uint32_t)x;
	return 0;
}

/* "c N" (one letter, a decimal id) starting the current line; *i is left
 * after the number. */
static int get_tag_id(lines *L, char tag, uint32_t *id, size_t *i)
{
	const uint8_t *s = L->line;
	size_t n = L->line_len, p = 2;
	uint64_t v = 0;
	if (n < 3 || s[0] != tag || s[1] != ' ' || s[2] < '0' || s[2] > '9')
		return -1;
	for (; p < n && s[p] >= '0' && s[p] <= '9'; p++) {
		v = v * 10 + (s[p] - '0');
		if (v >= BPE_NO_TOKEN)
			return -1;
	}
	*id = (uint32_t)v;
	*i = p;
	return 0;
}

static int parse_body(lines *L, bpe_builder *b, lm_err *e)
{
	uint32_t n_tok, n_spec, n_merge;
	char buf[64];
	if (need_line(L, "the header", e))
		return -1;
	size_t ml = strlen(TOK_MAGIC);
	if (L->line_len <= ml + 1 || memcmp(L->line, TOK_MAGIC " ", ml + 1))
		return lm_seterr(e, "%s:1: not an lmpipe tokenizer file (no \"%s\" header)", L->path, TOK_MAGIC);
	if (L->line_len - ml - 1 != 1 || L->line[ml + 1] != '0' + TOK_VERSION)
		return lm_seterr(e, "%s:1: unknown tokenizer file version \"%.*s\" (this program reads %d)",
				 L->path, (int)(L->line_len - ml - 1 < 16 ? L->line_len - ml - 1 : 16),
				 (const char *)L->line + ml + 1, TOK_VERSION);
	if (need_line(L, "the pre-tokenizer", e))
		return -1;
	if (L->line_len >= sizeof buf || L->line_len < 13 || memcmp(L->line, "pretokenizer ", 13))
		return lm_seterr(e, "%s:%zu: expected \"pretokenizer NAME\"", L->path, L->lineno);
	memcpy(buf, L->line + 13, L->line_len - 13);
	buf[L->line_len - 13] = 0;
	if (strcmp(buf, "gpt2"))
		return lm_seterr(e, "%s:%zu: unknown pre-tokenizer \"%s\" (known: gpt2)", L->path, L->lineno, buf);
	if (get_count(L, "tokens", &n_tok, e) || get_count(L, "specials", &n_spec, e) ||
	    get_count(L, "merges", &n_merge, e))
		return -1;
	uint8_t *tmp = malloc(L->len + 1);
	if (!tmp)
		return lm_seterr(e, "out of memory");
	int rc = -1;
	for (uint32_t i = 0; i < n_tok; i++) {
		uint32_t id;
		size_t p, len;
		if (need_line(L, "a token line", e))
			goto out;
		if (get_tag_id(L, 't', &id, &p) || id != i || p >= L->line_len || L->line[p] != ' ') {
			lm_seterr(e, "%s:%zu: expected \"t %u \\\"BYTES\\\"\"", L->path, L->lineno, i);
			goto out;
		}
		p++;
		if (get_quoted(L->line, L->line_len, &p, tmp, &len, e) ||
		    (p != L->line_len && lm_seterr(e, "text after the token")) ||
		    bb_add_token(b, tmp, len, e)) {
			lm_err_prefix(e, "%s:%zu", L->path, L->lineno);
			goto out;
		}
	}
	for (uint32_t i = 0; i < n_spec; i++) {
		uint32_t id;
		size_t p;
		if (need_line(L, "a special line", e))
			goto out;
		if (get_tag_id(L, 's', &id, &p) || p != L->line_len) {
			lm_seterr(e, "%s:%zu: expected \"s ID\"", L->path, L->lineno);
			goto out;
		}
		if (bb_mark_special(b, id, e)) {
			lm_err_prefix(e, "%s:%zu", L->path, L->lineno);
			goto out;
		}
	}
	for (uint32_t i = 0; i < n_merge; i++) {
		size_t p = 2, ll, rl;
		uint32_t left, right;
		if (need_line(L, "a merge line", e))
			goto out;
		if (L->line_len < 2 || memcmp(L->line, "m ", 2)) {
			lm_seterr(e, "%s:%zu: expected \"m \\\"LEFT\\\" \\\"RIGHT\\\"\"", L->path, L->lineno);
			goto out;
		}
		if (get_quoted(L->line, L->line_len, &p, tmp, &ll, e) ||
		    (p >= L->line_len || L->line[p++] != ' ' ? lm_seterr(e, "expected a space") : 0) ||
		    get_quoted(L->line, L->line_len, &p, tmp + ll, &rl, e) ||
		    (p != L->line_len && lm_seterr(e, "text after the merge"))) {
			lm_err_prefix(e, "%s:%zu", L->path, L->lineno);
			goto out;
		}
		char s1[BB_SHOW_MAX], s2[BB_SHOW_MAX];
		left = bb_find(b, tmp, ll);
		right = bb_find(b, tmp + ll, rl);
		if (left == BPE_NO_TOKEN || right == BPE_NO_TOKEN) {
			lm_seterr(e, "%s:%zu: merge \"%s\" \"%s\" uses a token that is not in the vocabulary",
				  L->path, L->lineno, bb_show(tmp, ll, s1), bb_show(tmp + ll, rl, s2));
			goto out;
		}
		if (bb_add_merge(b, left, right, e)) {
			lm_err_prefix(e, "%s:%zu", L->path, L->lineno);
			goto out;
		}
	}
	if (need_line(L, "\"end\"", e))
		goto out;
	if (L->line_len != 3 || memcmp(L->line, "end", 3)) {
		lm_seterr(e, "%s:%zu: expected \"end\"", L->path, L->lineno);
		goto out;
	}
	if (L->pos != L->len) {
		lm_seterr(e, "%s:%zu: text after \"end\"", L->path, L->lineno + 1);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	return rc;
}

int bpe_load(bpe_tokenizer *t, const char *path, lm_err *e)
{
	lines L = { .path = path };
	bpe_builder b;
	if (io_read_file(path, &L.buf, &L.len, e))
		return -1;
	if (bb_init(&b, t, e)) {
		free(L.buf);
		return -1;
	}
	int rc = parse_body(&L, &b, e);
	if (rc == 0 && bb_finish(&b, e))
		rc = lm_err_prefix(e, "%s", path);
	bb_discard(&b);
	free(L.buf);
	if (rc)
		bpe_free(t);
	return rc;
}

int bpe_add_special(bpe_tokenizer *t, const char *s, size_t len, uint32_t *id, lm_err *e)
{
	char show[BB_SHOW_MAX];
	const char *shown = bb_show((const uint8_t *)s, len, show);
	if (len == 0)
		return lm_usage_err(e, "a special token cannot be empty");
	for (uint32_t i = 0; i < t->n_vocab; i++) {
		if (bpe_token_len(t, i) != len || memcmp(bpe_token_bytes(t, i), s, len))
			continue;
		for (uint32_t k = 0; k < t->n_special; k++)
			if (t->special[k] == i) {
				*id = i;
				return 0;
			}
		return lm_usage_err(e, "special token \"%s\" is already a regular token (id %u)", shown, i);
	}
	if (t->n_vocab >= BPE_NO_TOKEN - 1)
		return lm_seterr(e, "too many tokens");
	uint64_t end = t->off ? t->off[t->n_vocab] : 0;
	uint8_t *bytes = realloc(t->bytes, end + len);
	if (!bytes)
		return lm_seterr(e, "out of memory");
	t->bytes = bytes;
	uint64_t *off = realloc(t->off, ((size_t)t->n_vocab + 2) * sizeof *off);
	if (!off)
		return lm_seterr(e, "out of memory");
	t->off = off;
	t->off[t->n_vocab] = end;
	uint32_t *sp = realloc(t->special, ((size_t)t->n_special + 1) * sizeof *sp);
	if (!sp)
		return lm_seterr(e, "out of memory");
	t->special = sp;
	memcpy(t->bytes + end, s, len);
	t->off[t->n_vocab + 1] = end + len;
	*id = t->n_vocab++;
	t->special[t->n_special++] = *id;
	if (len == strlen(BPE_EOT_TEXT) && !memcmp(s, BPE_EOT_TEXT, len))
		t->eot = *id;
	return 0;
}
