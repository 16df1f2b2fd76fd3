/* checked.h: checked arithmetic for sizes computed from a file's claims.
 *
 * A count, shape or offset read from a file is attacker-controlled: a
 * product or sum of two of them may wrap, and a wrapped size passes every
 * later bound check.  Each helper stores the exact result in *out and
 * returns 0, or returns -1 (leaving *out unspecified) when the result does
 * not fit the type, in the spirit of the reference safetensors'
 * checked_mul.  Callers turn -1 into a message naming the file and field:
 *
 *     size_t bytes;
 *     if (ck_mul_size(n, sizeof *p, &bytes))
 *             return lm_seterr(e, "%s: %llu entries overflow", path, n);
 */
#ifndef LMPIPE_CHECKED_H
#define LMPIPE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

static inline int ck_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

static inline int ck_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

/* a * b + c */
static inline int ck_muladd_u64(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
	uint64_t p;
	return ck_mul_u64(a, b, &p) || ck_add_u64(p, c, out) ? -1 : 0;
}

/* Sizes for malloc: also refuses what does not fit size_t. */
static inline int ck_mul_size(uint64_t a, uint64_t b, size_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int ck_add_size(uint64_t a, uint64_t b, size_t *out)
{
	return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* Signed counts (pair and word counts of a BPE). */
static inline int ck_add_i64(int64_t a, int64_t b, int64_t *out)
{
	return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

static inline int ck_mul_i64(int64_t a, int64_t b, int64_t *out)
{
	return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

#endif
