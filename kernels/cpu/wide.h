/* wide.h: WIDE, for a row loop that should run as wide as the machine
 * allows: the build targets x86-64-v2, and GCC's target clones add a
 * version for AVX2 (x86-64-v3) and for AVX-512 (x86-64-v4), chosen at load
 * time, that double or quadruple the loop's width. */
#ifndef LMPIPE_WIDE_H
#define LMPIPE_WIDE_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WIDE
#endif

#endif
