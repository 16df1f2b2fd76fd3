#!/bin/sh
# tests/man.t: every program has a man page that mandoc renders without
# warnings, and every option its --help lists appears in that page; every
# man5 page lints clean too, and lmpipe.7 maps them all.
. "$(dirname "$0")/lib.sh"

if ! command -v mandoc >/dev/null 2>&1; then
	echo "1..0 # SKIP mandoc is not installed"; exit 0
fi
for prog in "$LMPIPE_BIN"/*; do
	[ -x "$prog" ] || continue
	name=$(basename "$prog")
	page="$LMPIPE_ROOT/man/man1/$name.1"
	if [ ! -f "$page" ]; then ok 1 "$name: man page man/man1/$name.1 exists"; continue; fi
	lint=$(mandoc -T lint -W warning "$page" 2>&1)
	is "$lint" "" "$name.1: mandoc -T lint is clean"
	run "$prog" --help
	is "$rc" 0 "$name --help exits 0"
	[ -n "$out" ]; ok $? "$name --help prints to stdout"
	is "$("$prog" --help | tail -c 1 | od -An -c | tr -d ' ')" '\n' "$name --help ends with a newline"
	text=$(mandoc -T ascii "$page" 2>/dev/null | sed "s/.\x08//g")
	missing=""
	for o in $(printf '%s\n' "$out" | grep -oE '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u); do
		printf '%s\n' "$text" | grep -qe "$o" || missing="$missing $o"
	done
	is "$missing" "" "$name: every --help option is in its man page"
	run "$prog" --version
	case $rc:$out in "0:$name (lmpipe) "?*) r=0 ;; *) r=1 ;; esac
	ok $r "$name --version: its name and the build, exit 0 ($out)"
done
for page in "$LMPIPE_ROOT"/man/man5/*.5; do
	[ -f "$page" ] || continue
	lint=$(mandoc -T lint -W warning "$page" 2>&1)
	is "$lint" "" "$(basename "$page"): mandoc -T lint is clean"
done
# lmpipe(7), the map: it lints clean, and names every program, every file
# format and every LMPIPE_ variable the sources read (so that a new one is
# not left out of the one place a user looks for them all).
map=$LMPIPE_ROOT/man/man7/lmpipe.7
is "$(mandoc -T lint -W warning "$map" 2>&1)" "" "lmpipe.7: mandoc -T lint is clean"
maptext=$(mandoc -T ascii "$map" 2>/dev/null | sed "s/.\x08//g")
missing=""
for prog in "$LMPIPE_BIN"/*; do
	[ -x "$prog" ] || continue
	printf '%s\n' "$maptext" | grep -q "$(basename "$prog")(1)" || missing="$missing $(basename "$prog")"
done
is "$missing" "" "lmpipe.7 names every program"
missing=""
for page in "$LMPIPE_ROOT"/man/man5/*.5; do
	printf '%s\n' "$maptext" | grep -q "$(basename "$page" .5)(5)" || missing="$missing $(basename "$page")"
done
is "$missing" "" "lmpipe.7 names every file format"
vars=$(cd "$LMPIPE_ROOT" && cat tools/*.c libcommon/*/*.c kernels/*.c kernels/*/*.c kernels/*/*.cu 2>/dev/null |
	grep -oE 'getenv\("LMPIPE_[A-Z0-9_]+"\)' | sed 's/getenv("\(.*\)")/\1/' | sort -u)
[ -n "$vars" ]; ok $? "the sources read LMPIPE_ variables (the scan finds them)"
missing=""
for v in $vars; do printf '%s\n' "$maptext" | grep -q "$v" || missing="$missing $v"; done
is "$missing" "" "lmpipe.7 lists every LMPIPE_ variable the programs read"
# groff (man's formatter on Debian) is stricter about lines it cannot break.
if command -v groff >/dev/null 2>&1; then
	for page in "$LMPIPE_ROOT"/man/man1/*.1 "$LMPIPE_ROOT"/man/man5/*.5 "$map"; do
		is "$(groff -man -ww -z "$page" 2>&1)" "" "$(basename "$page"): groff -man -ww -z is silent"
	done
else
	echo "# groff is not installed: pages not checked with groff (apt-get install groff-base)"
fi
done_testing
