/* grade_internal.h: what the files of the math grader (grade.h) share: a
 * growable string with the edits the normalisations are made of, the two
 * normal forms, and Python's float() syntax.
 *
 *   grade_str.c   the string and its edits
 *   grade_norm.c  the two normal forms (grade_mathd, grade_normalize)
 *   grade.c       the comparison, the exact arithmetic, r1-zero */
#ifndef LMPIPE_GRADE_INTERNAL_H
#define LMPIPE_GRADE_INTERNAL_H

#include <stddef.h>

/* A NUL-terminated string; oom is sticky: every edit after a failed
 * allocation does nothing, and the caller checks oom once at the end. */
typedef struct gstr {
	char *p;
	size_t n, cap;
	int oom;
} gstr;

void gs_set(gstr *s, const char *p, size_t n);
void gs_free(gstr *s);
/* Every non-overlapping from (left to right) becomes to. */
void gs_replace(gstr *s, const char *from, const char *to);
/* Insert t[0..n) at at. */
void gs_insert(gstr *s, size_t at, const char *t, size_t n);
/* Delete [at, at + n). */
void gs_cut(gstr *s, size_t at, size_t n);
/* Keep [at, at + n) only. */
void gs_keep(gstr *s, size_t at, size_t n);
void gs_trim(gstr *s);
int gs_starts(const gstr *s, const char *prefix);
int gs_ends(const gstr *s, const char *suffix);
/* The first occurrence of needle at or after from, or -1. */
long gs_find(const gstr *s, const char *needle, size_t from);
/* Remove every `\<name>{...}` wrapper, keeping what is inside (the braces
 * balanced), e.g. \text{5 cm} -> "5 cm". */
void gs_unwrap(gstr *s, const char *macro);

/* The two normal forms of an answer, as the CS336 drgrpo grader computes
 * them (see grade.h).  grade_mathd is its mathd/Hendrycks string (which it
 * compares as is); grade_normalize its form before the sympy comparison. */
void grade_mathd(gstr *s);
void grade_normalize(gstr *s);

/* Python's float(s) (s[0..n): surrounding whitespace, a sign, digits with an
 * optional point and exponent, inf, infinity, nan): 1 and *x, or 0. */
int grade_py_float(const char *s, size_t n, double *x);
/* _str_is_int: s with its well-formed thousands commas removed parses as a
 * float within 1e-7 of an integer. */
int grade_str_is_int(const char *s, size_t n);
/* Remove the commas of well-formed thousands groups (d,ddd not followed by
 * a digit), as _strip_properly_formatted_commas. */
void grade_strip_commas(gstr *s);

#endif
