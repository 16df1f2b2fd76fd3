/* crc32c.c: CRC-32C, with the SSE4.2 crc32 instruction when the build
 * targets it (x86-64-v2 and later) and a byte-wise table otherwise. */
#include "base/crc32c.h"

#include <string.h>

#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc & 0xFFFFFFFFu;
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		n -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (n--)
		c32 = _mm_crc32_u8(c32, *p++);
	return ~c32;
}
#else
#include <pthread.h>

enum { CRC32C_POLY = 0x82F63B78u };

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		table[i] = c;
	}
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	pthread_once(&table_once, make_table);
	uint32_t c = ~crc;
	while (n--)
		c = table[(c ^ *p++) & 0xFF] ^ (c >> 8);
	return ~c;
}
#endif
