#!/bin/sh
# tests/rl-reward-cmd.t: rl-reward --cmd against scorers that misbehave
# (issue 22): one that hangs, one that closes its output and keeps running,
# one that prints without end.  Each is killed after the timeout or the byte
# bound, with a message saying what the scorer did, and nothing is written.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
printf '%s\n' '{"completion":"a"}' '{"completion":"b"}' > r.jsonl

elapsed() { # elapsed CMD...: runs it as run does, sets $secs
	t0=$(date +%s)
	run "$@"
	secs=$(($(date +%s) - t0))
}

elapsed rl-reward --timeout 1 -c 'sleep 30' -o out r.jsonl
is "$rc" 1 "a scorer that hangs: exit 1"
is "$err" "rl-reward: scoring r.jsonl: scorer 'sleep 30' did not finish within 1 s (killed)" \
	"message"
[ "$secs" -lt 10 ]; ok $? "killed at the timeout (${secs} s)"
[ ! -e out ]; ok $? "no output file"

elapsed rl-reward --timeout 1 -c 'cat >/dev/null; echo 1; echo 1; exec >&-; sleep 30' r.jsonl
is "$rc" 1 "a scorer that closes its output and keeps running: exit 1"
is "$err" "rl-reward: scoring r.jsonl: scorer 'cat >/dev/null; echo 1; echo 1; exec >&-; sleep 30' closed its output but did not exit within 1 s (killed)" \
	"message"
[ "$secs" -lt 10 ]; ok $? "killed at the timeout (${secs} s)"

# (an address-space limit makes the unbounded buffering of old fail fast;
# the sanitizers reserve too much address space for one)
limit=
[ "${LMPIPE_SANITIZE:-0}" = 1 ] || limit="ulimit -v 500000;"
elapsed sh -c "$limit rl-reward -c 'yes 1' r.jsonl"
is "$rc" 1 "a scorer that prints without end: exit 1"
is "$err" "rl-reward: scoring r.jsonl: scorer 'yes 1' printed more than 12288 bytes for 2 rollouts (killed)" \
	"message"

run rl-reward --timeout 5 -c 'cat >/dev/null; echo 1; echo 0' r.jsonl
is "$rc" 0 "a scorer within the bounds ($err)"
run rl-reward --help
case $out in *"--timeout S"*"(default 600)"*) ok 0 "--help shows the timeout and its default" ;;
*) ok 1 "--help shows the timeout and its default" ;; esac
done_testing
