#!/bin/sh
# tests/fuzz.t: replay the committed fuzz inputs (tests/fuzz/NAME/: seeds
# and every crash a fuzzer found, kept with its fix) through each harness
# fuzz/NAME.c built with fuzz/replay.c, in this build (under SANITIZE=1,
# with ASan and UBSan).  make fuzz does the fuzzing itself.
. "$(dirname "$0")/lib.sh"
B=${LMPIPE_BUILD:-$LMPIPE_ROOT/build}
for f in "$LMPIPE_ROOT"/fuzz/*.c; do
	name=$(basename "$f" .c)
	d=$LMPIPE_ROOT/tests/fuzz/$name/
	case $name in fuzz_util|replay) continue ;; esac
	[ -d "$d" ] || continue
	bin=$B/fuzz/$name-replay
	if [ ! -x "$bin" ]; then ok 1 "$name: no $bin (make test builds it)"; continue; fi
	run "$bin" "$d"*
	is "$rc" 0 "$name: $(ls "$d" | wc -l | tr -d ' ') inputs replay cleanly${err:+ ($err)}"
done
for f in "$LMPIPE_ROOT"/fuzz/*.c; do
	name=$(basename "$f" .c)
	case $name in fuzz_util|replay) continue ;; esac
	[ -d "$LMPIPE_ROOT/tests/fuzz/$name" ]; ok $? "harness $name has committed inputs"
done
done_testing
