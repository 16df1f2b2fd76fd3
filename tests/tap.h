/* tap.h: a tiny TAP producer for the C unit tests (run by prove).
 *
 *   ok(cond, "name %d", i);   is_int(got, want, "name");  near(a, b, tol, "name");
 *   skip_all("why");          return done_testing();
 */
#ifndef LMPIPE_TAP_H
#define LMPIPE_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

static inline __attribute__((format(printf, 2, 3)))
int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond) {  /* named on stderr too: prove shows it without -v */
		tap_failed++;
		fprintf(stderr, "#   Failed test %d: ", tap_n);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, "\n");
	}
	return cond;
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
	va_list ap;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

#define is_int(got, want, ...) \
	(ok((long long)(got) == (long long)(want), __VA_ARGS__) ? 1 : \
	 (diag("  got %lld, want %lld", (long long)(got), (long long)(want)), 0))

#define is_str(got, want, ...) \
	(ok((got) && (want) && !strcmp((got), (want)), __VA_ARGS__) ? 1 : \
	 (diag("  got '%s', want '%s'", (got) ? (got) : "(null)", (want) ? (want) : "(null)"), 0))

/* |a - b| <= tol, and never NaN. */
#define near(a, b, tol, ...) \
	(ok(fabs((double)(a) - (double)(b)) <= (tol), __VA_ARGS__) ? 1 : \
	 (diag("  got %.9g, want %.9g (tol %g)", (double)(a), (double)(b), (double)(tol)), 0))

static inline void skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* Where the shared CS336 data is, or NULL when it is absent. */
static inline const char *tap_data_dir(void)
{
	const char *d = getenv("LMPIPE_DATA");
	static char probe[4096];
	if (!d)
		return NULL;
	snprintf(probe, sizeof probe, "%s/README.md", d);
	FILE *fp = fopen(probe, "r");
	if (!fp)
		return NULL;
	fclose(fp);
	return d;
}

#endif
