#!/bin/sh
# fuzz/have_libfuzzer.sh CC: does CC link a libFuzzer harness with ASan and
# UBSan (and OpenMP)?  Exit 0 if so.
[ -n "${1:-}" ] || exit 1
d=$(mktemp -d "${TMPDIR:-/tmp}/lmpipe-hlf.XXXXXX")
trap 'rm -rf "$d"' EXIT
cat > "$d/t.c" <<'EOC'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return (int)(size && !data); }
EOC
"$1" -fsanitize=fuzzer,address,undefined -fopenmp -o "$d/t" "$d/t.c" >/dev/null 2>&1
