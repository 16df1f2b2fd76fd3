/* test_pretok.c: the GPT-2 pre-tokenizer scanner and the Unicode classes.
 * Hand-derived splits first, then the splits the real regex (Python's
 * `regex` module, tests/gen/pretok_regex.py) made of random multilingual
 * byte strings, read from tests/data/pretok-regex.txt (or $PRETOK_CASES). */
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "text/pretok.h"
#include "text/unicode.h"

enum { MAX_TOKENS = 4096, MAX_LINE = 1 << 16 };

/* The pieces of s joined with '|' ("a| b|\n"). */
static void split(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t k = pretok_next((const uint8_t *)s + i, n - i);
		if (i && o + 1 < cap)
			out[o++] = '|';
		for (size_t j = 0; j < k && o + 1 < cap; j++)
			out[o++] = s[i + j];
		i += k;
	}
	out[o] = 0;
}

/* s with control and non-ASCII bytes as \xHH, for a one-line test name. */
static const char *esc(const char *s)
{
	static char out[1024];
	size_t o = 0;
	for (; *s && o + 5 < sizeof out; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c >= 0x7F)
			o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = 0;
	return out;
}

static void check(const char *s, const char *want)
{
	char buf[1024];
	const char *got = buf;
	split(s, strlen(s), buf, sizeof buf);
	is_str(got, want, "split of \"%s\"", esc(s));
}

static void hand_cases(void)
{
	check("Hello, world!", "Hello|,| world|!");
	check("I'm don't we'll you've they're he'd it's", "I|'m| don|'t| we|'ll| you|'ve| they|'re| he|'d| it|'s");
	check("I'M DON'T", "I|'|M| DON|'|T");           /* case-sensitive: 'M is not a contraction */
	check("'l 'lL ''s ?'s", "'|l| '|lL| ''|s| ?'|s");
	check("a  b", "a| | b");                       /* backs off one space */
	check("a   b", "a|  | b");
	check("a\n\nb", "a|\n|\n|b");                  /* \s+(?!\S) then \s */
	check("a \n b", "a| \n| b");
	check("a\r\nb", "a|\r|\n|b");
	check("x\r\n\r\n", "x|\r\n\r\n");              /* trailing whitespace stays whole */
	check("end   ", "end|   ");
	check("\tfoo\t\tbar", "\t|foo|\t|\t|bar");     /* tab is not the optional space */
	check("  ", "  ");
	check(" ", " ");
	check("abc123def", "abc|123|def");
	check(" 2024 ", " 2024| ");
	check("x ++y", "x| ++|y");
	check("--->", "--->");
	check("héllo wörld", "héllo| wörld");
	check("Привет мир", "Привет| мир");
	check("中文字符", "中文字符");
	check("a\xe2\x80\x83" "b", "a|\xe2\x80\x83|b");              /* U+2003 EM SPACE is \s */
	check("a \xe3\x80\x80" "b", "a| |\xe3\x80\x80|b");          /* ideographic space */
	check("a\xc2\xa0\xc2\xa0" "b", "a|\xc2\xa0|\xc2\xa0|b");  /* NBSP run backs off */
	check("x\x1cy", "x|\x1c|y");              /* U+001C: \s for str.isspace, not White_Space */
	check("\xd9\xa3\xd9\xa4 \xe0\xa5\xab", "\xd9\xa3\xd9\xa4| \xe0\xa5\xab"); /* Arabic-Indic, Devanagari digits */
	check("\xe2\x85\xab\xc2\xbd", "\xe2\x85\xab\xc2\xbd");  /* Roman numeral XII (Nl), one half (No) */
	check("e\xcc\x81t\xc3\xa9", "e|\xcc\x81|t\xc3\xa9");   /* a combining mark is not a letter */
	check("hi \xf0\x9f\x98\x80\xf0\x9f\x98\x80!", "hi| \xf0\x9f\x98\x80\xf0\x9f\x98\x80!");
	check("ok\xff\xfe ok", "ok|\xff\xfe| ok");               /* invalid bytes are "other" */
	check("a\xe2\x82" "b", "a|\xe2\x82|b");                  /* truncated sequence */
	check("\xed\xa0\x80z", "\xed\xa0\x80|z");                 /* encoded surrogate is invalid */
	check("<|endoftext|>", "<||endoftext||>");
}

static void nul_case(void)
{
	static const char s[] = { 'a', 0, 'b', ' ', 0, 0, '\n' };
	size_t i = 0, lens[8], n = 0;
	while (i < sizeof s) {
		lens[n] = pretok_next((const uint8_t *)s + i, sizeof s - i);
		i += lens[n++];
	}
	ok(n == 5 && lens[0] == 1 && lens[1] == 1 && lens[2] == 1 && lens[3] == 3 && lens[4] == 1,
	   "NUL is an ordinary 'other' character: a|\\0|b| \\0\\0|\\n");
}

static void class_cases(void)
{
	is_int(uni_class_of('A'), UNI_LETTER, "A is a letter");
	is_int(uni_class_of(0x4E2D), UNI_LETTER, "U+4E2D (CJK) is a letter");
	is_int(uni_class_of(0xAC00), UNI_LETTER, "U+AC00 (Hangul, a First/Last range) is a letter");
	is_int(uni_class_of(0x0663), UNI_NUMBER, "U+0663 Arabic-Indic three is a number");
	is_int(uni_class_of(0x216B), UNI_NUMBER, "U+216B Roman numeral is a number");
	is_int(uni_class_of(0x3000), UNI_SPACE, "U+3000 is White_Space");
	is_int(uni_class_of(0x0085), UNI_SPACE, "U+0085 is White_Space");
	is_int(uni_class_of(0x200B), UNI_OTHER, "U+200B ZWSP is not White_Space");
	is_int(uni_class_of(0x001C), UNI_OTHER, "U+001C is not White_Space");
	is_int(uni_class_of(0x1F600), UNI_OTHER, "emoji is other");
	is_int(uni_class_of(0x10FFFF), UNI_OTHER, "U+10FFFF is other");
	uint32_t cp;
	is_int(uni_decode((const uint8_t *)"\xc0\xaf", 2, &cp), 1, "overlong form is invalid");
	ok(cp == UINT32_MAX, "overlong form decodes to nothing");
	is_int(uni_decode((const uint8_t *)"\xf4\x90\x80\x80", 4, &cp), 1, "past U+10FFFF is invalid");
	is_int(uni_decode((const uint8_t *)"\xf0\x9f\x98\x80", 4, &cp), 4, "emoji is 4 bytes");
	is_int(cp, 0x1F600, "emoji code point");
}

static int hexval(int c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Each line: HEX LEN,LEN,... ; every case must split exactly so. */
static void regex_cases(void)
{
	const char *env = getenv("PRETOK_CASES"), *root = getenv("LMPIPE_ROOT");
	char path[4096];
	if (env)
		snprintf(path, sizeof path, "%s", env);
	else
		snprintf(path, sizeof path, "%s/tests/data/pretok-regex.txt", root ? root : ".");
	FILE *fp = fopen(path, "r");
	if (!ok(fp != NULL, "open %s", path))
		return;
	static char line[MAX_LINE];
	static uint8_t buf[MAX_LINE / 2];
	long n_cases = 0, n_bad = 0;
	while (fgets(line, sizeof line, fp)) {
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		size_t n = (size_t)(sp - line) / 2;
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
		char *p = sp + 1;
		size_t i = 0;
		int good = 1;
		while (*p && *p != '\n' && i < n) {
			size_t want = strtoul(p, &p, 10), got = pretok_next(buf + i, n - i);
			if (got != want) {
				good = 0;
				break;
			}
			i += got;
			if (*p == ',')
				p++;
		}
		good = good && i == n;
		if (!good && n_bad++ < 5)
			diag("mismatch at byte %zu of case %ld: %.*s", i, n_cases + 1, (int)(sp - line), line);
		n_cases++;
	}
	fclose(fp);
	ok(n_cases > 0 && n_bad == 0, "%ld regex cases, %ld mismatches", n_cases, n_bad);
}

int main(void)
{
	hand_cases();
	nul_case();
	class_cases();
	regex_cases();
	return done_testing();
}
