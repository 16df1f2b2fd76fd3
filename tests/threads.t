#!/bin/sh
# tests/threads.t: without -j, bpe-encode starts as many encoding threads as
# OpenMP's default: OMP_NUM_THREADS when set, else the processors its
# affinity allows (taskset, a cpuset, Slurm's --cpus-per-task), not every
# processor of the host; -j overrides both.  Counted in /proc while the
# program waits for its input.
. "$(dirname "$0")/lib.sh"
[ -d /proc/self/task ] || { echo "1..0 # SKIP no /proc/PID/task"; exit 0; }
cd "$TMP" || exit 1
perl "$LMPIPE_ROOT/tests/mktext.pl" 200 1 > text.txt
bpe-learn -v 300 -o tok.bpe text.txt 2>/dev/null || { echo "1..0 # SKIP bpe-learn failed"; exit 0; }

# threads of a bpe-encode waiting on an empty pipe (its workers start before
# it reads), once their count has held for a moment; "$@" before the command,
# $J among its options
J=
tasks() {
	sleep 1 | env "$@" bpe-encode $J -t tok.bpe > /dev/null &
	pid=$!
	n=0 last=-1 same=0 i=0
	while [ $i -lt 100 ] && [ $same -lt 5 ]; do
		n=$(ls /proc/$pid/task 2>/dev/null | wc -l)
		if [ "$n" = "$last" ] && [ "$n" -gt 0 ]; then same=$((same + 1)); else same=0; fi
		last=$n i=$((i + 1))
		sleep 0.05
	done
	wait $pid
	echo $((n - 1)) # less the main thread
}

is "$(tasks OMP_NUM_THREADS=3)" 3 "OMP_NUM_THREADS=3: three encoding threads"
J="-j 2"
is "$(tasks OMP_NUM_THREADS=3)" 2 "-j 2 over OMP_NUM_THREADS=3: two"
J=
if command -v taskset > /dev/null && [ "$(nproc --all)" -ge 2 ]; then
	is "$(tasks -u OMP_NUM_THREADS taskset -c 0)" 1 "on one allowed processor (taskset -c 0): one"
else
	echo "# taskset missing or one processor: the affinity case not checked"
fi
is "$(tasks -u OMP_NUM_THREADS)" "$(env -u OMP_NUM_THREADS nproc)" "by default: as many as nproc says"
done_testing
