#!/bin/sh
# tests/gpu/sanitize.sh: compute-sanitizer's memcheck and racecheck on the
# GPU unit tests (issue 15: clean on the test shapes), each run's whole
# report kept in DIR (default build/sanitize, or $OUT/sanitize where the
# device machine's run collects files), then one line per tool and test:
# its summary and, for every reported hazard or error, the kernels it
# names, counted.  Slow (racecheck takes minutes on test_backend):
# not part of make test-gpu; `make sanitize-gpu` or run it directly.
#   TESTS="test_ops test_backend ..."  TOOLS="memcheck racecheck"
#   LIMIT=seconds per run (default 600)
#   SAN_OPTS="..." more compute-sanitizer options for every run (for
#   racecheck, e.g. "--racecheck-detect-level error" to leave out the
#   warnings, or "--racecheck-report hazard" for each hazard's threads)
#   LMPIPE_BUILD (default build) holds tests/gpu/.
#   LMPIPE_TEST_DRAWS (default here 5000, at least 1000): test_decode's chi-square draws
#   per test (200000 without a sanitizer), each a sampler row, which under
#   racecheck took minutes a test.
# The test's output is line-buffered (stdbuf), so that a run which dies
# shows its last check; the line also gives the exit status (124: the
# limit) and, where /usr/bin/time is, the run's largest resident size.
# racecheck runs with LMPIPE_MATMUL_REF=1: the matrix products go through
# a plain kernel of lmpipe's (kernels/cuda/gemm_ref.cu) instead of cuBLAS
# and cuBLASLt, whose Hopper kernels (nvjet_sm90_*) racecheck reports
# shared-memory hazards in that lmpipe can neither change nor check; so
# racecheck covers every kernel of lmpipe's own, and memcheck the real
# products.  RACE_REF=0 races the real products too.  (Excluding the
# nvjet kernels with --kernel-name-exclude is no way round: the
# sanitizer then skips those kernels, and the results are wrong.)
set -u
B=${LMPIPE_BUILD:-build}
DIR=${1:-${OUT:+$OUT/sanitize}}
DIR=${DIR:-$B/sanitize}
TESTS=${TESTS:-test_ops test_backend test_decode test_muon test_rl_backend}
TOOLS=${TOOLS:-memcheck racecheck}
LIMIT=${LIMIT:-600}
TM=""
[ -x /usr/bin/time ] && TM="/usr/bin/time -f maxrss_kb=%M"
command -v compute-sanitizer >/dev/null 2>&1 || { echo "sanitize.sh: no compute-sanitizer" >&2; exit 2; }
mkdir -p "$DIR" || exit 1
fail=0
for tool in $TOOLS; do
	for t in $TESTS; do
		log=$DIR/$tool-$t.log
		ref=0
		[ "$tool" = racecheck ] && [ "${RACE_REF:-1}" != 0 ] && ref=1
		# shellcheck disable=SC2086
		LMPIPE_TEST_DRAWS=${LMPIPE_TEST_DRAWS:-5000} LMPIPE_MATMUL_REF=$ref $TM timeout "$LIMIT" stdbuf -oL -eL compute-sanitizer --tool "$tool" --print-limit 1000 ${SAN_OPTS:-} \
			"$B/tests/gpu/$t" > "$log" 2>&1
		rc=$?
		rss=$(sed -n 's/^maxrss_kb=//p' "$log" | tail -1)
		last=$(grep '^ok\|^not ok' "$log" | tail -1 | cut -c1-80 | tr -d '"\\')
		summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
		checks=$(grep -c '^ok\|^not ok' "$log")
		# memcheck names a kernel "in NAME(", racecheck "access at NAME+0x..."
		kernels=$({ grep -oE "in (void )?[A-Za-z_:<>0-9, ]+\(" "$log" | sed 's/^in //; s/($//'
			grep -oE "access at [A-Za-z_0-9]+\+0x" "$log" | sed 's/^access at //; s/+0x$//'; } | sort | uniq -c |
			sort -rn | head -5 | awk '{ c = $1; $1 = ""; sub(/^ /, ""); printf "%s%s x%d", n++ ? "; " : "", $0, c }')
		echo "{\"tool\":\"$tool\",\"test\":\"$t\",\"matmul_ref\":$ref,\"rc\":$rc,\"checks\":$checks,\"last\":\"$last\",\"maxrss_kb\":${rss:-null},\"summary\":\"$summary\",\"kernels\":\"$kernels\",\"log\":\"$log\"}"
		[ "$rc" -eq 0 ] || fail=1
	done
done
exit $fail
