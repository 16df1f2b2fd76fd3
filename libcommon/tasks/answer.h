/* answer.h: reading answers out of model completions and comparing them:
 * numeric normalisation and the last number of a text (GSM8K style); the
 * r1-zero format and its math grader are grade.h.
 *
 * Normalised form of an answer (answer_normalize):
 *   1. a \boxed{...} around the whole answer is removed;
 *   2. when what remains, without '$', without commas and without
 *      whitespace, and without one trailing '.', is a number
 *        [+-]digits[.digits]    or    [+-]digits/digits
 *      it becomes canonical: no '+', no leading zeros, no trailing zeros
 *      after the point, a 0 before a bare point and no point without decimals ("007" "7.0" "$7"
 *      "7." all give "7"; "-0" gives "0"); a fraction is reduced and, when
 *      its denominator has no prime factors but 2 and 5, written as the exact
 *      decimal ("1/2" gives "0.5", "6/3" gives "2", "1/3" stays "1/3");
 *   3. otherwise it is the text with leading and trailing whitespace
 *      removed, inner runs of whitespace made one space, and ASCII letters
 *      lowered.
 * Two answers are equal when their normalised forms are the same string, so
 * the comparison is exact (no floating point). */
#ifndef LMPIPE_ANSWER_H
#define LMPIPE_ANSWER_H

#include <stddef.h>

/* Normalise s[0..n) into a malloc'd string (NULL when out of memory).
 * *numeric (may be NULL) is set to 1 when s is a number. */
char *answer_normalize(const char *s, size_t n, int *numeric);

/* 1 when the normalised forms are equal, 0 when not, -1 out of memory. */
int answer_equal(const char *a, size_t na, const char *b, size_t nb);

/* The last number in text[0..n), GSM8K style, as a malloc'd canonical
 * number ("... = 72 clips altogether" gives "72"; "$1,234.50" gives
 * "1234.5"), or NULL when the text has no digit (or out of memory: *oom
 * set).  A number is digits with optional thousands commas (a comma followed
 * by exactly three digits) and an optional decimal part; a '-' directly
 * before it counts as a sign unless a letter, digit or ')' precedes the '-'
 * ("48-24" is 48 and 24). */
char *answer_last_number(const char *text, size_t n, int *oom);

#endif
