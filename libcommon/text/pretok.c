/* pretok.c: the GPT-2 pre-tokenizer regex as a hand-written scanner (see
 * pretok.h).  The alternatives are tried in the regex's order, first match
 * wins, each quantifier greedy:
 *   1 '(?:[sdmt]|ll|ve|re)     ASCII, case-sensitive contractions
 *   2 ` ?\p{L}+`  3 ` ?\p{N}+`  4 ` ?[^\s\p{L}\p{N}]+`
 *                              an optional ASCII space, then a run of one class
 *   5 \s+(?!\S)                a whitespace run, less its last character when
 *                              a non-space follows (so that space can start
 *                              the next word)
 *   6 \s+                      a single whitespace character before a non-space
 */
#include "text/pretok.h"

#include "text/unicode.h"

/* End of the run of characters of class cls that starts at i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int cls)
{
	while (i < n) {
		size_t len;
		if (s[i] < 0x80) {
			if (uni_byte_class[s[i]] != cls)
				break;
			i++;
			continue;
		}
		if (uni_class_at(s + i, n - i, &len) != cls)
			break;
		i += len;
	}
	return i;
}

static size_t contraction(const uint8_t *s, size_t n)
{
	if (n < 2)
		return 0;
	switch (s[1]) {
	case 's': case 'd': case 'm': case 't':
		return 2;
	case 'l':
		return n >= 3 && s[2] == 'l' ? 3 : 0;
	case 'v': case 'r':
		return n >= 3 && s[2] == 'e' ? 3 : 0;
	default:
		return 0;
	}
}

size_t pretok_next(const uint8_t *s, size_t n)
{
	size_t len0, len1;
	if (s[0] == '\'') {
		size_t c = contraction(s, n);
		if (c)
			return c;
	}
	int c0 = uni_class_at(s, n, &len0);
	if (s[0] == ' ' && n > 1) {
		int c1 = uni_class_at(s + 1, n - 1, &len1);
		if (c1 != UNI_SPACE)
			return run_end(s, n, 1 + len1, c1);
	}
	if (c0 != UNI_SPACE)
		return run_end(s, n, len0, c0);

	/* alternatives 5 and 6: i walks the run, last is its last character */
	size_t i = len0, last = 0;
	while (i < n) {
		size_t len;
		if (uni_class_at(s + i, n - i, &len) != UNI_SPACE)
			return last > 0 ? last : i;
		last = i;
		i += len;
	}
	return n;
}
