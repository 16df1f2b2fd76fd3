/* bpe_decode.h: token ids back to bytes, from a token stream or from
 * decimal ids in text (whitespace separated). */
#ifndef LMPIPE_BPE_DECODE_H
#define LMPIPE_BPE_DECODE_H

#include <stdio.h>

#include "tok/bpe.h"

/* Decode every id of the input (a token stream, or decimal text when
 * text is set) to out.  An id outside the vocabulary, a malformed number or
 * a bad stream is an error naming the input and the position. */
int bpe_decode_file(const bpe_tokenizer *t, FILE *in, const char *name, int text, FILE *out,
		    const char *out_name, lm_err *e);

#endif
