/* unicode.h: the character classes of the GPT-2 pre-tokenizer (letter \p{L},
 * number \p{N}, space \s = White_Space, other), and strict UTF-8 decoding.
 *
 * The range table is generated from the Unicode Character Database by
 * gen_unicode.awk into unicode_tab.c (make unicode).  ASCII is answered from
 * a small table; other code points by binary search over the ranges. */
#ifndef LMPIPE_UNICODE_H
#define LMPIPE_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum uni_class { UNI_OTHER = 0, UNI_LETTER = 1, UNI_NUMBER = 2, UNI_SPACE = 3 };

enum { UNI_MAX_SEQ = 4 }; /* longest UTF-8 sequence, in bytes */

typedef struct uni_range {
	uint32_t lo, hi; /* inclusive */
	uint8_t cls;
} uni_range;

extern const uni_range uni_ranges[];  /* sorted, disjoint; absent = other */
extern const unsigned uni_n_ranges;
extern const char uni_version[];      /* "15.0.0" */

/* Class of each ASCII code point (and UNI_OTHER for 0x80..0xFF, which as a
 * lone byte is never a valid character). */
extern const uint8_t uni_byte_class[256];

/* Class of any code point (binary search; ASCII via the table). */
int uni_class_of(uint32_t cp);

/* Decode the character at s[0] (n > 0 bytes available).  Returns its length
 * in bytes and stores the code point; for a byte that does not start a valid,
 * complete, shortest-form UTF-8 sequence (no surrogates, <= U+10FFFF) returns
 * 1 and stores UINT32_MAX. */
size_t uni_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Class of the character at s[0] and its length in *len (invalid byte:
 * UNI_OTHER, length 1). */
static inline int uni_class_at(const uint8_t *s, size_t n, size_t *len)
{
	uint32_t cp;
	if (s[0] < 0x80) {
		*len = 1;
		return uni_byte_class[s[0]];
	}
	*len = uni_decode(s, n, &cp);
	return cp == UINT32_MAX ? UNI_OTHER : uni_class_of(cp);
}

#endif
