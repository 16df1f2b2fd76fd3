# tests/lib.sh: TAP helpers for the shell tests; source it from a tests/*.t.
#   ok CONDITION-STATUS NAME | is GOT WANT NAME | run CMD... (sets $rc, $out, $err)
#   need_data (skips the whole file when ../shared/data is absent) | need_gpu (when
#   there is no GPU) | byte_shards LINES (one test: shards of generated text) | done_testing
set -u
LMPIPE_ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
LMPIPE_BIN=${LMPIPE_BIN:-$LMPIPE_ROOT/bin}
LMPIPE_DATA=${LMPIPE_DATA:-$LMPIPE_ROOT/../shared/data}
PATH=$LMPIPE_BIN:$PATH
export PATH LMPIPE_ROOT LMPIPE_BIN LMPIPE_DATA
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lmpipe-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
_tap_n=0
_tap_failed=0

ok() { # ok STATUS NAME...: passes when STATUS is 0; a failure is named on stderr too,
	# which prove shows without -v (its messages carry the measured values)
	local st=$1; shift
	_tap_n=$((_tap_n + 1))
	if [ "$st" -eq 0 ]; then echo "ok $_tap_n - $*"; else
		echo "not ok $_tap_n - $*"
		echo "#   Failed test $_tap_n: $*" >&2
		_tap_failed=$((_tap_failed + 1))
	fi
	return "$st"
}

is() { # is GOT WANT NAME...
	local got=$1 want=$2; shift 2
	if [ "$got" = "$want" ]; then ok 0 "$@"; else
		ok 1 "$@"; printf '#   got:  %s\n#   want: %s\n' "$got" "$want" | head -20
	fi
}

run() { # run CMD...: captures stdout, stderr and the exit code
	rc=0
	"$@" >"$TMP/.out" 2>"$TMP/.err" || rc=$?
	out=$(cat "$TMP/.out"); err=$(cat "$TMP/.err")
}

need_data() {
	if [ ! -r "$LMPIPE_DATA/README.md" ]; then
		echo "1..0 # SKIP needs ../shared/data (not present)"; exit 0
	fi
}

need_gpu() {
	if ! nvidia-smi -L >/dev/null 2>&1; then echo "1..0 # SKIP no GPU"; exit 0; fi
}

byte_shards() { # byte_shards LINES: in the current folder, LINES lines of generated
	# text (text.txt), its bytes as tokens (text.tok), and shards of them in d with
	# every 20th document in the validation split d-val; one test
	perl "$LMPIPE_ROOT/tests/mktext.pl" "$1" 1 > text.txt
	perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
	shard-pack -o d --val-docs $(($1 / 20)) < text.tok
	ok $? "byte-level shards with a validation split"
}

done_testing() { echo "1..$_tap_n"; [ "$_tap_failed" -eq 0 ]; }
