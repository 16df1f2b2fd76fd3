/* unicode.c: code point classes (binary search over the generated ranges of
 * unicode_tab.c) and strict UTF-8 decoding, for the pre-tokenizer. */
#include "text/unicode.h"

int uni_class_of(uint32_t cp)
{
	if (cp < 0x80)
		return uni_byte_class[cp];
	unsigned lo = 0, hi = uni_n_ranges;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (cp < uni_ranges[mid].lo)
			hi = mid;
		else if (cp > uni_ranges[mid].hi)
			lo = mid + 1;
		else
			return uni_ranges[mid].cls;
	}
	return UNI_OTHER;
}

static int is_cont(uint8_t b)
{
	return (b & 0xC0) == 0x80;
}

size_t uni_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t b = s[0];
	*cp = UINT32_MAX;
	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xC2 && b <= 0xDF) {
		if (n < 2 || !is_cont(s[1]))
			return 1;
		*cp = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3F);
		return 2;
	}
	if (b >= 0xE0 && b <= 0xEF) {
		/* the second byte's range excludes overlong forms and surrogates */
		uint8_t lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
		if (n < 3 || s[1] < lo || s[1] > hi || !is_cont(s[2]))
			return 1;
		*cp = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
		return 3;
	}
	if (b >= 0xF0 && b <= 0xF4) {
		/* excludes overlong forms and code points past U+10FFFF */
		uint8_t lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
		if (n < 4 || s[1] < lo || s[1] > hi || !is_cont(s[2]) || !is_cont(s[3]))
			return 1;
		*cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
		      (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
		return 4;
	}
	return 1;
}
