/* docs.c: documents out of plain, JSON Lines and compressed files (see
 * docs.h).  A plain file is mapped and its range cut at document starts; a
 * compressed file (or a pipe) is read as a stream.  Either way the bytes go
 * through one parser per format: the end-of-text mode copies them as they
 * are, the line modes split them into lines first. */
#define _POSIX_C_SOURCE 200809L
#include "text/docs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/io.h"

enum {
	READ_CHUNK = 1 << 20,         /* bytes per read of a stream */
	MAX_LINE_BYTES = 256 << 20,   /* longest line held while reading a stream */
	/* find(): false starts of the first byte before memmem takes over */
	FIND_FALSE_STARTS = 64,
};
#define MAX_LINE_TEXT "256 MiB"


static const unsigned char UTF8_BOM[] = { 0xef, 0xbb, 0xbf };

typedef struct parser {
	const docs_opts *o;
	const char *path;
	FILE *out;
	const char *out_name;
	docs_stats *st;
	size_t eot_len;
	const unsigned char *map;  /* the mapped file (plain files), else NULL */
	uint64_t base;             /* file offset of the first byte fed */
	uint64_t fed;              /* bytes fed so far */
	uint64_t lines;            /* newlines fed so far (line modes) */
	unsigned char *line;       /* a line cut by the end of a chunk */
	size_t line_n, line_cap;
	unsigned char tail[64];    /* end-of-text mode: the last bytes fed, to find separators */
	size_t tail_n;             /*   that straddle two chunks */
	int in_doc;                /* blank-line mode: a document is open */
} parser;

/* ---- positions for messages ---- */

/* The 1-based line of the file after lines_in_feed newlines of the feed
 * (the lines before a byte range are counted only now, on an error). */
static uint64_t line_of(const parser *p, uint64_t lines_in_feed)
{
	uint64_t before = 0;
	if (p->map)
		for (uint64_t i = 0; i < p->base; i++)
			before += p->map[i] == '\n';
	return before + lines_in_feed + 1;
}

static int err_line(parser *p, lm_err *e, const char *what)
{
	return lm_seterr(e, "%s:%llu: %s", p->path, (unsigned long long)line_of(p, p->lines),
			 what);
}

static int check_text(parser *p, const unsigned char *b, size_t n, lm_err *e)
{
	const unsigned char *z = memchr(b, 0, n);
	if (z)
		return lm_seterr(e, "%s: byte %llu: a NUL byte: binary data, not text", p->path,
				 (unsigned long long)(p->base + p->fed + (uint64_t)(z - b)));
	return 0;
}

static int emit(parser *p, const void *b, size_t n, lm_err *e)
{
	p->st->bytes_out += n;
	return io_write_all(p->out, b, n, p->out_name, e);
}

static int emit_eot(parser *p, lm_err *e)
{
	p->st->docs++;
	return emit(p, p->o->eot, p->eot_len, e);
}

/* ---- end-of-text mode: bytes as they are ---- */

static uint64_t count_eot(parser *p, const unsigned char *b, size_t n)
{
	const char *eot = p->o->eot;
	size_t len = p->eot_len, keep = len - 1;
	uint64_t found = 0;
	/* separators that start in the tail and end in b */
	unsigned char joint[2 * sizeof p->tail];
	size_t head = n < keep ? n : keep;
	memcpy(joint, p->tail, p->tail_n);
	memcpy(joint + p->tail_n, b, head);
	for (size_t i = 0; i + len <= p->tail_n + head; i++)
		if (i < p->tail_n && !memcmp(joint + i, eot, len))
			found++;
	for (const unsigned char *q = b, *end = b + n;
	     (q = memmem(q, (size_t)(end - q), eot, len)) != NULL; q += len)
		found++;
	/* keep the last len - 1 bytes of tail + b */
	size_t total = p->tail_n + n;
	size_t k = total < keep ? total : keep;
	unsigned char nt[sizeof p->tail];
	for (size_t i = 0; i < k; i++) {
		size_t at = total - k + i;
		nt[i] = at < p->tail_n ? p->tail[at] : b[at - p->tail_n];
	}
	memcpy(p->tail, nt, k);
	p->tail_n = k;
	return found;
}

static int feed_eot(parser *p, const unsigned char *b, size_t n, lm_err *e)
{
	if (check_text(p, b, n, e))
		return -1;
	if (!p->map) /* a stream: lines counted for messages */
		for (const unsigned char *q = b; (q = memchr(q, '\n', (size_t)(b + n - q))); q++)
			p->lines++;
	p->st->docs += count_eot(p, b, n);
	p->st->bytes_out += n;
	return io_write_all(p->out, b, n, p->out_name, e);
}

/* ---- line modes ---- */

static int blank(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return 0;
	return 1;
}

static int jsonl_line(parser *p, const unsigned char *s, size_t n, lm_err *e)
{
	if (blank(s, n))
		return 0;
	json_error_t je;
	json_t *v = json_loadb((const char *)s, n, 0, &je);
	char what[LM_ERR_MSG_MAX / 2];
	if (!v) {
		snprintf(what, sizeof what, "not JSON: %s (column %d)", je.text, je.column);
		return err_line(p, e, what);
	}
	int rc = 0;
	json_t *t = json_is_object(v) ? json_object_get(v, p->o->field) : NULL;
	if (!json_is_object(v)) {
		rc = err_line(p, e, "not a JSON object");
	} else if (!t) {
		snprintf(what, sizeof what, "no \"%s\" member", p->o->field);
		rc = err_line(p, e, what);
	} else if (!json_is_string(t)) {
		snprintf(what, sizeof what, "\"%s\" is not a string", p->o->field);
		rc = err_line(p, e, what);
	} else {
		rc = emit(p, json_string_value(t), json_string_length(t), e);
		if (!rc)
			rc = emit_eot(p, e);
	}
	json_decref(v);
	return rc;
}

static int text_line(parser *p, const unsigned char *s, size_t n, lm_err *e)
{
	if (p->o->sep == DOCS_SEP_LINE) {
		if (blank(s, n))
			return 0;
		return emit(p, s, n, e) ? -1 : emit_eot(p, e);
	}
	if (blank(s, n)) {
		if (!p->in_doc)
			return 0;
		p->in_doc = 0;
		return emit_eot(p, e);
	}
	if (p->in_doc && emit(p, "\n", 1, e))
		return -1;
	p->in_doc = 1;
	return emit(p, s, n, e);
}

static int one_line(parser *p, const unsigned char *s, size_t n, lm_err *e)
{
	return p->o->format == DOCS_JSONL ? jsonl_line(p, s, n, e) : text_line(p, s, n, e);
}

static int hold_line(parser *p, const unsigned char *s, size_t n, lm_err *e)
{
	if (p->line_n + n > MAX_LINE_BYTES)
		return err_line(p, e, "a line too long to hold (over " MAX_LINE_TEXT ")");
	if (p->line_n + n > p->line_cap) {
		size_t cap = p->line_cap ? p->line_cap : READ_CHUNK;
		while (cap < p->line_n + n)
			cap *= 2;
		unsigned char *q = realloc(p->line, cap);
		if (!q)
			return lm_seterr(e, "out of memory holding a line of %s", p->path);
		p->line = q;
		p->line_cap = cap;
	}
	memcpy(p->line + p->line_n, s, n);
	p->line_n += n;
	return 0;
}

static int feed_lines(parser *p, const unsigned char *b, size_t n, lm_err *e)
{
	if (p->o->format == DOCS_TEXT && check_text(p, b, n, e))
		return -1;
	const unsigned char *s = b, *end = b + n;
	while (s < end) {
		const unsigned char *nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			return hold_line(p, s, (size_t)(end - s), e);
		int rc;
		if (p->line_n) {
			rc = hold_line(p, s, (size_t)(nl - s), e);
			if (!rc)
				rc = one_line(p, p->line, p->line_n, e);
			p->line_n = 0;
		} else {
			rc = one_line(p, s, (size_t)(nl - s), e);
		}
		if (rc)
			return -1;
		p->lines++;
		s = nl + 1;
	}
	return 0;
}

static int feed(parser *p, const unsigned char *b, size_t n, lm_err *e)
{
	if (p->base + p->fed == 0 && n >= 2 &&
	    ((b[0] == 0xff && b[1] == 0xfe) || (b[0] == 0xfe && b[1] == 0xff)))
		return lm_seterr(e, "%s: UTF-16 or UTF-32 text (byte-order mark %02X %02X): "
				 "convert it to UTF-8 first (iconv -t UTF-8)", p->path, b[0], b[1]);
	if (p->base + p->fed == 0 && n >= sizeof UTF8_BOM && !memcmp(b, UTF8_BOM, sizeof UTF8_BOM)) {
		b += sizeof UTF8_BOM;
		n -= sizeof UTF8_BOM;
		p->fed += sizeof UTF8_BOM;
	}
	p->st->bytes_in += n;
	int rc = p->o->format == DOCS_TEXT && p->o->sep == DOCS_SEP_EOT ?
		 feed_eot(p, b, n, e) : feed_lines(p, b, n, e);
	p->fed += n;
	return rc;
}

static int finish(parser *p, lm_err *e)
{
	int rc = 0;
	if (p->line_n)
		rc = one_line(p, p->line, p->line_n, e);
	if (!rc && p->in_doc)
		rc = emit_eot(p, e);
	return rc;
}

/* ---- where documents start in a plain file ---- */

static int line_start(const unsigned char *m, uint64_t i)
{
	return i == 0 || m[i - 1] == '\n';
}

/* The end (exclusive) of the line starting at i. */
static uint64_t line_end(const unsigned char *m, uint64_t size, uint64_t i)
{
	const unsigned char *nl = memchr(m + i, '\n', (size_t)(size - i));
	return nl ? (uint64_t)(nl - m) : size;
}

/* The first w[0 .. len) in s[0 .. n), or NULL: memchr for its first byte,
 * about twice memmem's speed where that byte is rare (an end-of-text's '<'
 * in text); after FIND_FALSE_STARTS false starts memmem, linear whatever
 * the bytes. */
static const unsigned char *find(const unsigned char *s, size_t n, const char *w, size_t len)
{
	const unsigned char *end = s + n;
	for (int k = 0; k < FIND_FALSE_STARTS && (size_t)(end - s) >= len; k++) {
		const unsigned char *q = memchr(s, (unsigned char)w[0], (size_t)(end - s) - len + 1);
		if (!q || !memcmp(q, w, len))
			return q;
		s = q + 1;
	}
	return (size_t)(end - s) >= len ? memmem(s, (size_t)(end - s), w, len) : NULL;
}

/* The first document start at or after off (size if none). */
static uint64_t next_start(const docs_opts *o, const unsigned char *m, uint64_t size,
			   uint64_t off)
{
	if (off == 0 || off >= size)
		return off == 0 ? 0 : size;
	if (o->format == DOCS_TEXT && o->sep == DOCS_SEP_EOT) {
		size_t len = strlen(o->eot);
		uint64_t from = off >= len ? off - len : 0;
		const unsigned char *q = find(m + from, (size_t)(size - from), o->eot, len);
		return q ? (uint64_t)(q - m) + len : size;
	}
	uint64_t i = off;
	if (!line_start(m, i))
		i = line_end(m, size, i) + 1;
	if (o->format == DOCS_JSONL || o->sep == DOCS_SEP_LINE || i >= size)
		return i < size ? i : size;
	/* blank-line mode: a non-blank line after a blank one */
	uint64_t prev = i - 1;
	while (prev > 0 && m[prev - 1] != '\n')
		prev--;
	int prev_blank = blank(m + prev, (size_t)(i - 1 - prev));
	while (i < size) {
		uint64_t end = line_end(m, size, i);
		int b = blank(m + i, (size_t)(end - i));
		if (!b && prev_blank)
			return i;
		prev_blank = b;
		i = end + 1;
	}
	return size;
}

/* ---- reading ---- */

static int copy_stream(parser *p, FILE *in, lm_err *e)
{
	unsigned char *buf = malloc(READ_CHUNK);
	if (!buf)
		return lm_seterr(e, "out of memory");
	int rc = 0;
	for (;;) {
		size_t got;
		rc = io_read_some(in, buf, READ_CHUNK, &got, p->path, e);
		if (rc || got == 0)
			break;
		if ((rc = feed(p, buf, got, e)))
			break;
	}
	free(buf);
	return rc;
}

/* The decompressed bytes of child c, to the end, then the end of the text. */
static int copy_child(parser *p, docs_codec codec, docs_child c, lm_err *e)
{
	if (copy_stream(p, c.out, e)) {
		docs_child_kill(&c);
		return -1;
	}
	if (docs_child_finish(&c, codec, p->path, e)) {
		size_t n = strlen(e->msg);
		snprintf(e->msg + n, sizeof e->msg - n, ", after %llu bytes (in line %llu) of text",
			 (unsigned long long)p->fed, (unsigned long long)p->lines + 1);
		return -1;
	}
	return finish(p, e);
}

static int no_range(const parser *p, docs_codec codec, lm_err *e)
{
	if (p->o->start != 0 || p->o->end != DOCS_TO_END)
		return lm_usage_err(e, "%s: %s data cannot be read by byte range", p->path,
				    docs_codec_name(codec));
	return 0;
}

static int copy_compressed(parser *p, docs_codec codec, lm_err *e)
{
	docs_child c;
	if (no_range(p, codec, e) || docs_child_start(&c, codec, p->path, e))
		return -1;
	return copy_child(p, codec, c, e);
}

/* A stream (standard input, a pipe; its callers refuse a byte range): its
 * first bytes read to tell its codec, then, plain, they and the rest
 * parsed; compressed, they and the rest handed to the decompressor (through
 * a feeder process: they cannot be put back).  in is read to its end or
 * handed over; not closed. */
static int copy_unseekable(parser *p, FILE *in, lm_err *e)
{
	unsigned char head[DOCS_HEAD_BYTES];
	size_t n = 0, got;
	while (n < sizeof head && (got = fread(head + n, 1, sizeof head - n, in)) > 0)
		n += got;
	if (ferror(in))
		return lm_seterr(e, "%s: read error:", p->path);
	docs_codec codec = docs_codec_in(head, n);
	if (codec != DOCS_PLAIN) {
		docs_child c;
		if (docs_child_start_stream(&c, codec, in, head, n, p->path, e))
			return -1;
		return copy_child(p, codec, c, e);
	}
	int rc = n ? feed(p, head, n, e) : 0;
	if (!rc)
		rc = copy_stream(p, in, e);
	return rc ? rc : finish(p, e);
}

/* Map a plain file of size bytes (fd) and find the span [*a, *b) of the
 * documents that start in o's range; *m is NULL for an empty file. */
static int map_range(const docs_opts *o, const char *path, int fd, uint64_t size,
		     const unsigned char **m, uint64_t *a, uint64_t *b, lm_err *e)
{
	*m = NULL;
	*a = *b = 0;
	if (o->start > size || (o->end != DOCS_TO_END && o->end < o->start))
		return lm_usage_err(e, "%s: range %llu:%llu outside its %llu bytes", path,
				    (unsigned long long)o->start, (unsigned long long)o->end,
				    (unsigned long long)size);
	if (size == 0)
		return 0;
	void *q = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (q == MAP_FAILED)
		return lm_seterr(e, "%s: mmap:", path);
	*m = q;
	*a = next_start(o, *m, size, o->start);
	*b = o->end == DOCS_TO_END ? size : next_start(o, *m, size, o->end);
	madvise((void *)(*m + *a), (size_t)(*b - *a), MADV_SEQUENTIAL);
	return 0;
}

static int copy_mapped(parser *p, int fd, uint64_t size, lm_err *e)
{
	uint64_t a, b;
	if (map_range(p->o, p->path, fd, size, &p->map, &a, &b, e))
		return -1;
	if (!p->map)
		return 0;
	p->base = a;
	int rc = a < b ? feed(p, p->map + a, (size_t)(b - a), e) : 0;
	if (!rc)
		rc = finish(p, e);
	munmap((void *)p->map, (size_t)size);
	p->map = NULL;
	return rc;
}

/* path opened for reading, its status in *sb: the descriptor, or -1 (a
 * directory too) with e set. */
static int open_input(const char *path, struct stat *sb, lm_err *e)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return lm_seterr(e, "%s:", path);
	if (fstat(fd, sb) != 0) {
		lm_seterr(e, "%s:", path);
		close(fd);
		return -1;
	}
	if (S_ISDIR(sb->st_mode)) {
		close(fd);
		lm_seterr(e, "%s: a directory, not a file", path);
		return -1;
	}
	return fd;
}

int docs_copy(const docs_opts *o, const char *path, FILE *out, const char *out_name,
	      docs_stats *st, lm_err *e)
{
	parser p;
	memset(&p, 0, sizeof p);
	p.o = o;
	p.path = io_name(path);
	p.out = out;
	p.out_name = out_name;
	p.st = st;
	p.eot_len = strlen(o->eot);
	if (p.eot_len == 0 || p.eot_len > sizeof p.tail)
		return lm_usage_err(e, "the end-of-text text must be 1 to %zu bytes",
				    sizeof p.tail);
	int rc;
	if (!strcmp(path, "-")) {
		if (o->start != 0 || o->end != DOCS_TO_END)
			return lm_usage_err(e, "<stdin> cannot be read by byte range");
		rc = copy_unseekable(&p, stdin, e);
		free(p.line);
		return rc;
	}
	struct stat sb;
	int fd = open_input(path, &sb, e);
	if (fd < 0)
		return -1;
	/* a file's codec from its first bytes, a pipe's from those it gives */
	docs_codec codec = DOCS_PLAIN;
	rc = S_ISREG(sb.st_mode) ? docs_codec_of(path, &codec, e) : 0;
	if (!rc && codec != DOCS_PLAIN) {
		rc = copy_compressed(&p, codec, e);
	} else if (!rc && S_ISREG(sb.st_mode)) {
		rc = copy_mapped(&p, fd, (uint64_t)sb.st_size, e);
	} else if (!rc) {
		FILE *in = fdopen(fd, "rb");
		if (!in) {
			close(fd);
			return lm_seterr(e, "%s:", path);
		}
		if (o->start != 0 || o->end != DOCS_TO_END)
			rc = lm_usage_err(e, "%s: a pipe cannot be read by byte range", p.path);
		else
			rc = copy_unseekable(&p, in, e);
		fclose(in);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	free(p.line);
	return rc;
}

/* ---- a range in place ---- */

int docs_span_open(const docs_opts *o, const char *path, docs_span *s, lm_err *e)
{
	memset(s, 0, sizeof *s);
	const char *name = io_name(path);
	size_t eot_len = strlen(o->eot);
	if (o->format != DOCS_TEXT || o->sep != DOCS_SEP_EOT)
		return lm_usage_err(e, "%s: only end-of-text separated text can be read in place", name);
	if (eot_len == 0 || eot_len > sizeof ((parser *)0)->tail)
		return lm_usage_err(e, "the end-of-text text must be 1 to %zu bytes",
				    sizeof ((parser *)0)->tail);
	if (!strcmp(path, "-"))
		return lm_usage_err(e, "<stdin> cannot be read in place");
	struct stat sb;
	int fd = open_input(path, &sb, e);
	if (fd < 0)
		return -1;
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return lm_usage_err(e, "%s: not a regular file: it cannot be read in place", name);
	}
	docs_codec codec = DOCS_PLAIN;
	if (docs_codec_of(path, &codec, e)) {
		close(fd);
		return -1;
	}
	if (codec != DOCS_PLAIN) {
		close(fd);
		return lm_usage_err(e, "%s: %s data cannot be read by byte range", name,
				    docs_codec_name(codec));
	}
	const unsigned char *m;
	uint64_t a, b, size = (uint64_t)sb.st_size;
	int rc = map_range(o, name, fd, size, &m, &a, &b, e);
	close(fd);
	if (rc || !m)
		return rc;
	s->map = (void *)m;
	s->map_n = (size_t)size;
	/* as feed() and check_text() see it */
	if (a == 0 && b >= 2 && ((m[0] == 0xff && m[1] == 0xfe) || (m[0] == 0xfe && m[1] == 0xff))) {
		unsigned b0 = m[0], b1 = m[1];
		docs_span_free(s);
		return lm_seterr(e, "%s: UTF-16 or UTF-32 text (byte-order mark %02X %02X): "
				 "convert it to UTF-8 first (iconv -t UTF-8)", name, b0, b1);
	}
	if (a == 0 && b >= sizeof UTF8_BOM && !memcmp(m, UTF8_BOM, sizeof UTF8_BOM))
		a = sizeof UTF8_BOM;
	const unsigned char *z = a < b ? memchr(m + a, 0, (size_t)(b - a)) : NULL;
	if (z) {
		uint64_t at = (uint64_t)(z - m);
		docs_span_free(s);
		return lm_seterr(e, "%s: byte %llu: a NUL byte: binary data, not text", name,
				 (unsigned long long)at);
	}
	s->p = m + a;
	s->n = (size_t)(b - a);
	return 0;
}

void docs_span_free(docs_span *s)
{
	if (s->map)
		munmap(s->map, s->map_n);
	memset(s, 0, sizeof *s);
}

/* ---- plans ---- */

int docs_plan(const char *const *paths, int n, uint64_t piece_bytes, docs_piece **pieces,
	      size_t *n_pieces, lm_err *e)
{
	size_t cap = (size_t)n + 1, k = 0;
	docs_piece *v = malloc(cap * sizeof *v);
	if (!v)
		return lm_seterr(e, "out of memory");
	for (int i = 0; i < n; i++) {
		struct stat sb;
		docs_codec codec = DOCS_PLAIN;
		uint64_t size = 0;
		lm_err ignored;
		/* what cannot be read stays whole: reading it fails, in its own task */
		if (stat(paths[i], &sb) == 0 && S_ISREG(sb.st_mode) &&
		    docs_codec_of(paths[i], &codec, &ignored) == 0 && codec == DOCS_PLAIN)
			size = (uint64_t)sb.st_size;
		uint64_t parts = piece_bytes && size > piece_bytes ?
				 (size + piece_bytes - 1) / piece_bytes : 1;
		if (k + parts > cap) {
			while (cap < k + parts)
				cap *= 2;
			docs_piece *q = realloc(v, cap * sizeof *q);
			if (!q) {
				free(v);
				return lm_seterr(e, "out of memory");
			}
			v = q;
		}
		for (uint64_t j = 0; j < parts; j++) {
			v[k].path = paths[i];
			v[k].start = j * piece_bytes;
			v[k].end = j + 1 < parts ? (j + 1) * piece_bytes : DOCS_TO_END;
			if (parts == 1)
				v[k].start = 0;
			k++;
		}
	}
	*pieces = v;
	*n_pieces = k;
	return 0;
}

/* The weights of n pieces of one file, each piece starting where the one
 * before it ends. */
static void run_bytes(const docs_opts *o, const docs_piece *v, size_t n, uint64_t *bytes)
{
	memset(bytes, 0, n * sizeof *bytes);
	int fd = open(v[0].path, O_RDONLY);
	struct stat sb;
	if (fd < 0)
		return;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return;
	}
	uint64_t size = (uint64_t)sb.st_size;
	docs_codec codec = DOCS_PLAIN;
	lm_err ignored;
	void *m = MAP_FAILED;
	if (docs_codec_of(v[0].path, &codec, &ignored) == 0 && codec == DOCS_PLAIN && size > 0)
		m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	/* the document start at the end of the piece before (the same cut) */
	uint64_t prev_b = 0;
	int have_prev = 0;
	for (size_t i = 0; i < n; i++) {
		const docs_piece *pc = &v[i];
		if (m == MAP_FAILED || pc->start > size || (pc->start == 0 && pc->end == DOCS_TO_END)) {
			bytes[i] = size;
			have_prev = 0;
			continue;
		}
		uint64_t a = have_prev ? prev_b : next_start(o, m, size, pc->start);
		uint64_t b = pc->end == DOCS_TO_END ? size : next_start(o, m, size, pc->end);
		bytes[i] = b > a ? b - a : 0;
		prev_b = b;
		have_prev = 1;
	}
	if (m != MAP_FAILED)
		munmap(m, (size_t)size);
}

void docs_plan_bytes(const docs_opts *o, const docs_piece *v, size_t n, uint64_t *bytes)
{
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && v[j].path == v[i].path && v[j].start == v[j - 1].end)
			j++;
		run_bytes(o, v + i, j - i, bytes + i);
		i = j;
	}
}
