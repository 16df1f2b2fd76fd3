#!/bin/sh
# pipelines/train-stage.sh DIR LOG RECIPE DATA CMD...: the training stage of
# pretrain.mk.  It never deletes a checkpoint:
#   - DIR holds checkpoints of the same recipe on the same data (RECIPE, a
#     file with the training command minus its step count, equals
#     DIR/.recipe, which is newer than the file DATA that stands for the
#     shards): the run goes on with CMD --resume (after an interrupt; a
#     larger -n extends it);
#   - DIR holds checkpoints of another recipe or data: DIR and LOG are moved
#     aside to DIR.1 (DIR.2, ...) and CMD starts a new run;
#   - else CMD starts a new run.
set -eu
if [ $# -lt 5 ]; then
	echo "usage: train-stage.sh DIR LOG RECIPE DATA CMD..." >&2
	exit 2
fi
dir=$1 log=$2 recipe=$3 data=$4
shift 4
has_ckpt() { ls "$dir"/step-*.safetensors >/dev/null 2>&1; }
if has_ckpt && cmp -s "$recipe" "$dir/.recipe" && [ "$dir/.recipe" -nt "$data" ]; then
	echo "train-stage.sh: $dir holds this run's checkpoints: resuming" >&2
	exec "$@" --resume
fi
if has_ckpt; then
	n=1
	while [ -e "$dir.$n" ]; do n=$((n + 1)); done
	mv -- "$dir" "$dir.$n"
	if [ -e "$log" ]; then mv -- "$log" "$dir.$n/"; fi
	echo "train-stage.sh: $dir held a run with other parameters or data: moved to $dir.$n" >&2
fi
mkdir -p -- "$dir"
cp -- "$recipe" "$dir/.recipe"
exec "$@" --force
