/* replay.c: a main for a harness without libFuzzer: each file named on the
 * command line is one input (make test replays tests/fuzz/NAME/ with it). */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *fp = fopen(argv[i], "rb");
		if (!fp) {
			perror(argv[i]);
			return 2;
		}
		uint8_t *buf = NULL;
		size_t n = 0, cap = 0;
		for (int c; (c = fgetc(fp)) != EOF;) {
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				uint8_t *p = realloc(buf, cap);
				if (!p)
					return 2;
				buf = p;
			}
			buf[n++] = (uint8_t)c;
		}
		fclose(fp);
		LLVMFuzzerTestOneInput(buf, n);
		free(buf);
	}
	return 0;
}
