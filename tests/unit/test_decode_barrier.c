/* test_decode_barrier.c: dec_barrier (decode_ops.h) keeps teams in step:
 * after each barrier every thread sees every other thread's write from
 * before it, for teams of several sizes sharing one barrier in turn (as a
 * decoder's chunks do), more threads than cores included. */
#include <omp.h>
#include <stdatomic.h>

#include "../tap.h"
#include "kernels/decode_ops.h"

enum { MAX_T = 8, ROUNDS = 300 };

/* ROUNDS barriers in a team of nt: round r, each thread writes its slot,
 * then after the barrier checks every slot of the team. */
static int team(dec_barrier *b, int nt)
{
	static int slot[MAX_T];
	atomic_int bad = 0;
#pragma omp parallel num_threads(nt)
	{
		int t = omp_get_thread_num(), n = omp_get_num_threads();
		for (int r = 1; r <= ROUNDS; r++) {
			slot[t] = r;
			dec_barrier_wait(b, t, n);
			for (int i = 0; i < n; i++)
				if (slot[i] != r)
					atomic_fetch_add(&bad, 1);
			dec_barrier_wait(b, t, n);
		}
	}
	return bad;
}

int main(void)
{
	dec_barrier b;
	if (dec_barrier_init(&b, MAX_T) < 0) {
		diag("out of memory");
		return 1;
	}
	static const int sizes[] = { 1, 2, 3, MAX_T, 2, 5 };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		is_int(team(&b, sizes[i]), 0, "a team of %d: every write seen after each of %d barriers",
		       sizes[i], ROUNDS);
	dec_barrier_free(&b);
	return done_testing();
}
