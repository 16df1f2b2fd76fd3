#!/bin/sh
# plot-metrics.sh: render metrics JSON Lines as a PNG with gnuplot.
#   plot-metrics.sh loss   TRAIN.jsonl OUT.png   train and validation loss against tokens
#                                                (lm-train --log)
#   plot-metrics.sh reward ROUNDS.jsonl OUT.png [EVAL.jsonl]
#                                                mean reward per round (rl-update lines,
#                                                one per round, in order) and, from
#                                                align.mk's log, held-out accuracy after
#                                                SFT (round 0) and after each round
# The PNG is written whole or not at all.
set -eu
usage() { echo "usage: plot-metrics.sh loss|reward IN.jsonl OUT.png" >&2; exit 2; }
[ $# -eq 3 ] || [ $# -eq 4 ] || usage
kind=$1 in=$2 out=$3 evals=${4:-}
command -v gnuplot >/dev/null || { echo "plot-metrics.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -r "$in" ] || { echo "plot-metrics.sh: $in: cannot read" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

field() { # field NAME: the number after "NAME": on each line, or "-" if absent
	sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p;t;s/.*/-/p"
}

case $kind in
loss)
	# Training lines carry step, loss and tokens; validation lines step and
	# val_loss: place each validation point at its step's token count.
	awk 'match($0, /"step":[0-9]+/) { s = substr($0, RSTART + 7, RLENGTH - 7) }
	     match($0, /"tokens":[0-9]+/) { tok[s] = substr($0, RSTART + 9, RLENGTH - 9) }
	     match($0, /"loss":[-0-9.eE+]+/) && $0 !~ /val_loss/ {
	         print tok[s], substr($0, RSTART + 7, RLENGTH - 7) > "'"$tmp"'/train.dat" }
	     match($0, /"val_loss":[-0-9.eE+]+/) {
	         print tok[s], substr($0, RSTART + 11, RLENGTH - 11) > "'"$tmp"'/val.dat" }' "$in"
	[ -s "$tmp/train.dat" ] || { echo "plot-metrics.sh: $in: no training loss lines" >&2; exit 1; }
	touch "$tmp/val.dat"
	plot="plot '$tmp/train.dat' using 1:2 with lines title 'train', '$tmp/val.dat' using 1:2 with linespoints title 'validation'"
	[ -s "$tmp/val.dat" ] || plot="plot '$tmp/train.dat' using 1:2 with lines title 'train'"
	labels="set xlabel 'tokens'; set ylabel 'loss (nats/token)'; set title 'lm-train'"
	;;
reward)
	field reward_mean < "$in" | awk '$1 != "-" { print NR, $1 }' > "$tmp/reward.dat"
	[ -s "$tmp/reward.dat" ] || { echo "plot-metrics.sh: $in: no reward_mean lines" >&2; exit 1; }
	plot="plot '$tmp/reward.dat' using 1:2 with linespoints title 'mean training reward'"
	if [ -n "$evals" ]; then
		sed -n 's/^{"stage":"sft","accuracy":\([-0-9.eE+]*\).*/0 \1/p;
			s/^{"stage":"grpo-\([0-9]*\)","accuracy":\([-0-9.eE+]*\).*/\1 \2/p' "$evals" > "$tmp/acc.dat"
		[ -s "$tmp/acc.dat" ] && plot="$plot, '$tmp/acc.dat' using 1:2 with linespoints title 'held-out accuracy (greedy)'"
	fi
	labels="set xlabel 'round (0: after SFT)'; set xtics 1; set ylabel 'reward, accuracy'; set title 'alignment'"
	;;
*) usage ;;
esac

gnuplot -e "set terminal png size 800,500; set output '$tmp/out.png'; set grid; set key top right; $labels; $plot"
mv "$tmp/out.png" "$out.tmp"
mv "$out.tmp" "$out"
