/* pretok.h: the GPT-2 pre-tokenizer as a hand-written scanner.
 *
 * Equivalent to the regex used by GPT-2, tiktoken and CS336:
 *   '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with \p{L}, \p{N} and \s the real Unicode properties (tables generated from
 * the Unicode Character Database, see unicode.h).  Input is bytes; a byte
 * that does not start a valid UTF-8 sequence counts as one character that is
 * neither letter, number nor space (so arbitrary bytes pre-tokenize
 * deterministically and round-trip). */
#ifndef LMPIPE_PRETOK_H
#define LMPIPE_PRETOK_H

#include <stddef.h>
#include <stdint.h>

/* Length in bytes (>= 1) of the pre-token that starts at s[0], where
 * s[0..n) is the rest of the text up to the end of its segment (the end of
 * the input or the next special token; the lookahead of \s+(?!\S) sees
 * that end as end of text).  n must be > 0. */
size_t pretok_next(const uint8_t *s, size_t n);

#endif
