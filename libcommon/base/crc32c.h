/* crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial
 * value and final xor 0xFFFFFFFF), the checksum of the shard format; the
 * check value of "123456789" is 0xE3069283 (RFC 3720, appendix B.4). */
#ifndef LMPIPE_CRC32C_H
#define LMPIPE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes; chain calls by passing the previous result as crc
 * (start with 0). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t n);

#endif
