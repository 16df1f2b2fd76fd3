#!/bin/sh
# fuzz/run.sh BIN FZ SECONDS NAME...: run each harness FZ/bin/NAME for
# SECONDS on its corpus FZ/corpus/NAME, seeded by fuzz/seeds.sh (programs in
# BIN) and tests/fuzz/NAME.  One line per harness: runs, coverage, and the
# input of a crash, leak or UBSan report (copy it to tests/fuzz/NAME/ with
# the fix, so that make test replays it).  Exit 1 if any harness failed.
set -u
BIN=$1 FZ=$2 SECONDS_EACH=$3
shift 3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$FZ/seeds" ] || "$ROOT/fuzz/seeds.sh" "$BIN" "$FZ/seeds" || { echo "fuzz: seeds failed"; exit 1; }
status=0
for name in "$@"; do
	corpus=$FZ/corpus/$name log=$FZ/log/$name.txt
	mkdir -p "$corpus" "$FZ/log" "$FZ/crash"
	set -- "$corpus"
	[ -d "$FZ/seeds/$name" ] && set -- "$@" "$FZ/seeds/$name"
	[ -d "$ROOT/tests/fuzz/$name" ] && set -- "$@" "$ROOT/tests/fuzz/$name"
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	"$FZ/bin/$name" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$FZ/crash/$name-" "$@" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	units=$(ls "$corpus" | wc -l | tr -d ' ')
	if [ "$rc" = 0 ]; then
		echo "fuzz: $name: ${runs:-?} runs in ${SECONDS_EACH} s, cov ${cov:-?}, ft ${ft:-?}, corpus $units: ok"
	else
		status=1
		crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
		echo "fuzz: $name: FAILED (exit $rc) after ${runs:-?} runs; input: ${crash:-none}; log: $log"
		grep -m3 -E 'ERROR: |runtime error|SUMMARY' "$log" | sed 's/^/fuzz:   /'
	fi
done
exit $status
