/* fuzz.h: what the libFuzzer harnesses share (make fuzz; see README.md).
 *
 * Each harness fuzz/NAME.c defines LLVMFuzzerTestOneInput for one parser.
 * Built with clang -fsanitize=fuzzer,address,undefined it is a fuzzer; built
 * with replay.c (any compiler, the normal or the sanitizer build) it runs
 * the files given on its command line once each, which is how make test
 * replays the committed cases in tests/fuzz/NAME/. */
#ifndef LMPIPE_FUZZ_H
#define LMPIPE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A scratch directory of this process (made once), and path_in's paths in
 * it; fuzz_write_file writes data under such a name. */
const char *fuzz_path(const char *name);
int fuzz_write_file(const char *path, const void *data, size_t size);
/* The input as a read-only stream (fmemopen; an empty input is a stream
 * that ends at once). */
FILE *fuzz_stream(const uint8_t *data, size_t size);

#endif
