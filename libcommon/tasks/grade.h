/* grade.h: the r1-zero math grader, scoring answers as the CS336
 * assignment 5 drgrpo grader (r1_zero_reward_fn with fast=True) does,
 * without its sympy.
 *
 * r1-zero format: the completion contains "</think> <answer>" and
 * "</answer>" (anywhere); the answer is the text after the last "<answer>"
 * with every "</answer>" removed; when it holds \boxed, the answer is the
 * last \boxed{...} (braces balanced), and an unbalanced or bare \boxed is
 * wrong (format 1, answer 0).
 *
 * An answer is right (grade_answer) when either of two normal forms agree:
 *   mathd:  the answer without an enclosing \text{}, newlines, "\!", \left,
 *           \right, a trailing \text{...} unit, stand-alone unit words,
 *           ^\circ, "\$", "\%" and spaces; \dfrac and \tfrac as \frac,
 *           \frac12 as \frac{1}{2}, \sqrt3 as \sqrt{3}, a leading "x=" of at
 *           most two characters dropped, ".5" as "0.5", "0.5" as \frac{1}{2}
 *           and "a/b" of plain integers as \frac{a}{b}; compared as strings;
 *   sympy:  the answer without $, %, unit words (even inside words), ^\circ
 *           and spaces, "or"/"and" as commas, million/billion/trillion as
 *           *10^N, a number within 1e-7 of an integer as that integer,
 *           \frac{a}{b} as a/b, "7 3/4" as 7+3/4, lower case, thousands
 *           commas removed; equal strings are right; else tuples "(a,b)"
 *           compare element by element, where two fractions a/b must be the
 *           same string (2/4 is not 1/2), an integer matches only an integer,
 *           and other elements match when both are the same exact number
 *           (decimals, fractions, + - * / ^ and parentheses, evaluated in
 *           exact rational arithmetic: where the grader asks sympy, which
 *           also proves algebraic identities, we compare numbers only).
 * A ground truth holding \boxed is its last \boxed{...} first.  An answer
 * or truth of more than 16 KiB is wrong (the time to grade is bounded). */
#ifndef LMPIPE_GRADE_H
#define LMPIPE_GRADE_H

#include <stddef.h>

/* 1 when given[0..n) is a right answer for truth[0..nt), 0 when not, -1 out
 * of memory. */
int grade_answer(const char *given, size_t n, const char *truth, size_t nt);

/* Score an r1-zero completion: *format and *answer (0 or 1); 0, or -1 out
 * of memory. */
int grade_r1_zero(const char *completion, size_t n, const char *truth, size_t nt,
		  int *format, int *answer);

#endif
