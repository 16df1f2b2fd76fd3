#!/bin/sh
# tests/device.t: --device on a machine without a GPU (CI's): asking for
# cuda is a runtime error (exit 1) that says the device is not available
# and names the CPU instead, before any training or output; an unknown
# device is a usage error (exit 2).  On a machine with a GPU the CUDA
# checks are tests/gpu/'s.
. "$(dirname "$0")/lib.sh"

cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 200 1 | perl "$LMPIPE_ROOT/tests/bytes2tok.pl" | shard-pack -o d
ok $? "a tiny shard"
if nvidia-smi -L >/dev/null 2>&1; then
	echo "# a GPU is here: the no-GPU cases are skipped"
else
	run lm-train --device cuda -m tiny --vocab 256 -n 1 -d d -o out
	is "$rc" 1 "lm-train --device cuda without a GPU: exit 1"
	case $err in "lm-train: device 'cuda' is not available: "*"use --device cpu") ok 0 "it says so: $err" ;;
		*) ok 1 "it says so: $err" ;; esac
	[ ! -e out ]
	ok $? "nothing written, not even the output directory"
	run lm-train --device cuda --export-hf hf -c nosuch.safetensors
	is "$rc" 1 "--export-hf on cuda without a GPU: exit 1 ($err)"
fi
run lm-train --device tpu -m tiny --vocab 256 -n 1 -d d
is "$rc" 2 "an unknown device: exit 2"
case $err in "lm-train: --device: unknown value 'tpu'"*) ok 0 "it says so: $err" ;; *) ok 1 "it says so: $err" ;; esac
done_testing
