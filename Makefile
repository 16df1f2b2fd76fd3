# lmpipe: build every program into bin/, run the tests, install.
#
#   make                 build (CUDA parts too when nvcc is found)
#   make CUDA=0          CPU-only build, for machines without the CUDA toolkit
#   make MPI=0           without OpenMPI (lm-train then runs one rank per run)
#   make test            the CPU test suite (TAP, run by prove)
#   make test SANITIZE=1 the same suite built with ASan + UBSan (in build-san/)
#   make test-gpu        CUDA ops against their CPU twins (on a GPU machine)
#   make sanitize-gpu    compute-sanitizer memcheck and racecheck on those tests
#   make fuzz FUZZ_SECONDS=N  each libFuzzer harness of fuzz/ for N seconds
#                        (clang with libFuzzer; skipped without it)
#   make attention-variants  the CUDA attention kernels the default build leaves
#                        out, as BUILD/libattn_variants.a (kernels/cuda/variants/)
#   make bench-NAME      run bench/NAME.sh (prints JSON lines)
#   make install PREFIX=/usr/local
#   make demo            install missing packages (Debian/Ubuntu), build, and run
#                        pipelines/pretrain.mk then pipelines/align.mk on the
#                        fortunes corpus in DEMO_DIR (default demo/)
#
# Under CI (CI=true) warnings are errors.

PREFIX  ?= /usr/local
CC      ?= cc
CUDA_HOME ?= /usr/local/cuda
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
SANITIZE ?= 0
LMPIPE_DATA ?= $(abspath $(CURDIR)/../shared/data)

ifeq ($(SANITIZE),1)
  B    := build-san
  BIN  := build-san/bin
  CUDA := 0
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else
  B    := build
  BIN  := bin
  SANFLAGS :=
endif

ifeq ($(NVCC),)
  CUDA ?= 0
else
  CUDA ?= 1
endif

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
ifeq ($(CI),true)
  WARN   += -Werror
endif
OPTFLAGS ?= -O2 -march=x86-64-v2
CFLAGS   ?= $(OPTFLAGS) -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SANFLAGS) -fopenmp -pthread \
              -I. -Ilibcommon -MMD -MP
LDFLAGS  ?=
LDLIBS   := -Wl,--as-needed -lzstd -ljansson -lopenblas -lm
ALL_LDFLAGS := $(LDFLAGS) $(SANFLAGS) -fopenmp -pthread

# MPI=1 (the default where pkg-config finds OpenMPI): lm-train's ranks talk
# over MPI on the CPU (libcommon/dist); MPI=0: a build without it.
MPI ?= $(shell pkg-config --exists ompi-c 2>/dev/null && echo 1 || echo 0)
ifeq ($(MPI),1)
  ALL_CFLAGS += -DLMPIPE_MPI=1 $(shell pkg-config --cflags ompi-c)
  LDLIBS += $(shell pkg-config --libs ompi-c)
endif

NVCCFLAGS ?= -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo
ALL_NVCCFLAGS := $(NVCCFLAGS) -std=c++17 -I. -Ilibcommon -Xcompiler -Wall -MMD -MP
ifeq ($(CUDA),1)
  ALL_CFLAGS += -DLMPIPE_CUDA=1 -I$(CUDA_HOME)/include
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++
endif

LIB_SRC    := $(sort $(wildcard libcommon/*/*.c))
KCPU_SRC   := $(sort $(wildcard kernels/*.c kernels/cpu/*.c))
KCUDA_SRC  := $(if $(filter 1,$(CUDA)),$(sort $(wildcard kernels/cuda/*.cu)))
VARIANT_SRC := $(if $(filter 1,$(CUDA)),$(sort $(wildcard kernels/cuda/variants/*.cu)))
TOOL_SRC   := $(sort $(wildcard tools/*.c))
UNIT_SRC   := $(sort $(wildcard tests/unit/*.c))
GPU_SRC    := $(sort $(wildcard tests/gpu/*.c))

FUZZ_SRC   := $(filter-out fuzz/fuzz_util.c fuzz/replay.c,$(sort $(wildcard fuzz/*.c)))
FUZZ_NAMES := $(patsubst fuzz/%.c,%,$(FUZZ_SRC))

PROGRAMS   := $(patsubst tools/%.c,$(BIN)/%,$(TOOL_SRC))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
GPU_TESTS  := $(patsubst tests/gpu/%.c,$(B)/tests/gpu/%,$(GPU_SRC))
LIBCOMMON  := $(B)/libcommon.a
LIBKERNELS := $(B)/libkernels.a
LIBS       := $(LIBCOMMON) $(LIBKERNELS)
LIBVARIANTS := $(B)/libattn_variants.a

# Each harness also built with replay.c: make test runs tests/fuzz/NAME/*.
FUZZ_REPLAY := $(patsubst %,$(B)/fuzz/%-replay,$(FUZZ_NAMES))

OBJ = $(patsubst %.c,$(B)/%.o,$(LIB_SRC) $(KCPU_SRC) $(TOOL_SRC) $(UNIT_SRC) $(GPU_SRC) \
        $(wildcard fuzz/*.c)) \
      $(patsubst %.cu,$(B)/%.cu.o,$(KCUDA_SRC) $(VARIANT_SRC))

.PHONY: all test test-gpu sanitize-gpu install clean unicode demo fuzz attention-variants
.SECONDARY:

all: $(PROGRAMS)

$(B)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The build's version (--version, and every checkpoint's lmpipe.build): git
# describe of this tree, noted in $(B)/build.txt, which is rewritten only
# when it changes, so that only version.o follows a new commit.
LMPIPE_BUILD := $(shell git -C $(CURDIR) describe --always --dirty 2>/dev/null || echo unknown)
$(shell mkdir -p $(B); [ "$$(cat $(B)/build.txt 2>/dev/null)" = "$(LMPIPE_BUILD)" ] || \
  echo "$(LMPIPE_BUILD)" > $(B)/build.txt)
$(B)/libcommon/base/version.o: $(B)/build.txt
$(B)/libcommon/base/version.o: ALL_CFLAGS += -DLMPIPE_BUILD='"$(LMPIPE_BUILD)"'

# The ops' CPU twins: math functions without errno (nothing reads it), so
# that a loop calling sqrtf vectorizes (the same IEEE operations lane by
# lane, so the same bits).
$(patsubst %.c,$(B)/%.o,$(KCPU_SRC)): ALL_CFLAGS += -fno-math-errno

# CUDA objects are NAME.cu.o so that an op's CPU twin (kernels/cpu/NAME.o)
# and its CUDA version are distinct members of libkernels.a.
$(B)/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(ALL_NVCCFLAGS) -c -o $@ $<

$(LIBCOMMON): $(patsubst %.c,$(B)/%.o,$(LIB_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

$(LIBKERNELS): $(patsubst %.c,$(B)/%.o,$(KCPU_SRC)) $(patsubst %.cu,$(B)/%.cu.o,$(KCUDA_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

# Not in the default build: the attention kernels that bench/attention.sh
# VARIANT=... and bench/attention-notes.md compare with the default ones.
ifeq ($(CUDA),1)
attention-variants: $(LIBVARIANTS)
else
attention-variants:
	@echo "attention-variants needs a CUDA build (nvcc not found or CUDA=0)"; exit 2
endif

$(LIBVARIANTS): $(patsubst %.cu,$(B)/%.cu.o,$(VARIANT_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

$(BIN)/%: $(B)/tools/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

$(B)/tests/%: $(B)/tests/unit/%.o $(LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

$(B)/fuzz/%-replay: $(B)/fuzz/%.o $(B)/fuzz/replay.o $(B)/fuzz/fuzz_util.o $(LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS) $(LDLIBS)

$(B)/tests/gpu/%: $(B)/tests/gpu/%.o $(LIBS)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# The test environment: where the programs and the shared data are.
TEST_ENV = LMPIPE_BIN=$(abspath $(BIN)) LMPIPE_ROOT=$(CURDIR) LMPIPE_DATA=$(LMPIPE_DATA) \
           LMPIPE_SANITIZE=$(SANITIZE) LMPIPE_BUILD=$(abspath $(B)) \
           ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1

test: $(PROGRAMS) $(UNIT_TESTS) $(FUZZ_REPLAY)
	$(TEST_ENV) prove --exec '' $(PROVEFLAGS) $(UNIT_TESTS) $(sort $(wildcard tests/*.t))

# The GPU tests: five files at a time, their OpenMP threads (the CPU
# references) waiting passively rather than spinning, sixteen a process on
# the device's sixteen cores (stop 61: about 385 s for the whole at -j 4
# with spinning threads, an H100's host; stop 63: 62 s so, an H200's); then
# lm-train-dp-cuda.t alone (two ranks on the one GPU).
GPU_T_ALONE := tests/gpu/lm-train-dp-cuda.t
GPU_T       := $(filter-out $(GPU_T_ALONE),$(sort $(wildcard tests/gpu/*.t)))
GPU_JOBS    ?= 5

test-gpu: $(PROGRAMS) $(GPU_TESTS)
	@test "$(CUDA)" = 1 || { echo "test-gpu needs a CUDA build (nvcc not found or CUDA=0)"; exit 2; }
	$(TEST_ENV) OMP_WAIT_POLICY=passive prove --exec '' -j $(GPU_JOBS) $(PROVEFLAGS) $(GPU_TESTS) $(GPU_T)
	$(TEST_ENV) prove --exec '' $(PROVEFLAGS) $(GPU_T_ALONE)

# compute-sanitizer memcheck and racecheck on the GPU unit tests (minutes)
sanitize-gpu: $(GPU_TESTS)
	@test "$(CUDA)" = 1 || { echo "sanitize-gpu needs a CUDA build (nvcc not found or CUDA=0)"; exit 2; }
	LMPIPE_BUILD=$(B) sh tests/gpu/sanitize.sh

# ---- fuzzing: libFuzzer with ASan + UBSan, everything built by clang in
# build-fuzz/.  Corpora grow in build-fuzz/corpus/NAME from seeds that the
# programs make (fuzz/seeds.sh) and the committed cases of tests/fuzz/NAME.
FUZZ_CC      ?= $(firstword $(shell command -v clang-14 clang 2>/dev/null))
FUZZ_SECONDS ?= 60
FZ           := build-fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -march=x86-64-v2 -fopenmp -pthread -I. -Ilibcommon \
                -MMD -MP $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_LDLIBS  := -lzstd -ljansson -lopenblas -lm

$(FZ)/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

# The kernels are no parser (and use GCC builtins): the normal build's.
$(FZ)/libcommon.a: $(patsubst %.c,$(FZ)/%.o,$(LIB_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

$(FZ)/bin/%: $(FZ)/fuzz/%.o $(FZ)/fuzz/fuzz_util.o $(FZ)/libcommon.a $(LIBKERNELS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -fopenmp -pthread -o $@ $^ $(FUZZ_LDLIBS)

fuzz: $(PROGRAMS) $(LIBKERNELS)
	@if fuzz/have_libfuzzer.sh "$(FUZZ_CC)"; then \
		$(MAKE) --no-print-directory $(patsubst %,$(FZ)/bin/%,$(FUZZ_NAMES)) && \
		fuzz/run.sh $(abspath $(BIN)) $(FZ) $(FUZZ_SECONDS) $(FUZZ_NAMES); \
	else echo "fuzz: skipped: no clang with libFuzzer (Debian: apt-get install clang-14 libclang-rt-14-dev libomp-14-dev)"; fi

bench-%: $(PROGRAMS)
	$(TEST_ENV) bench/$*.sh

install: $(PROGRAMS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(PROGRAMS) $(DESTDIR)$(PREFIX)/bin
	$(if $(wildcard man/man1/*.1),install -m 644 $(wildcard man/man1/*.1) $(DESTDIR)$(PREFIX)/share/man/man1)
	$(if $(wildcard man/man5/*.5),install -m 644 $(wildcard man/man5/*.5) $(DESTDIR)$(PREFIX)/share/man/man5)
	$(if $(wildcard man/man7/*.7),install -m 644 $(wildcard man/man7/*.7) $(DESTDIR)$(PREFIX)/share/man/man7)

clean:
	rm -rf build build-san build-fuzz bin

# The demo: the whole path from text to an aligned model, small enough for a
# CPU in a few minutes.  DEMO_DEVICE=cuda trains, samples and updates on the
# GPU (the pipelines' DEVICE; tests/gpu/pipelines-cuda.t runs them so).
DEMO_DIR    ?= demo
DEMO_DEVICE ?= cpu
DEMO_PRETRAIN = VOCAB=1024 CONTEXT=192 STEPS=400 BATCH=16 LR=3e-3 EVAL_EVERY=100 \
                MODEL_OPTS="--vocab 1024 --context 192 --d-model 128 --layers 2 --heads 4 --d-ff 352"
DEMO_ALIGN  = N_TRAIN=2000 SFT_EPOCHS=1 SFT_BATCH=16 SFT_LR=2e-3 N_TEST=100 ROUNDS=4 PROMPTS=32 G=8
demo:
	@pipelines/deps.sh
	$(MAKE) -j$$(nproc) all
	@mkdir -p $(DEMO_DIR) && date +%s > $(DEMO_DIR)/.started
	$(MAKE) -f pipelines/pretrain.mk W=$(DEMO_DIR) DEVICE=$(DEMO_DEVICE) $(DEMO_PRETRAIN)
	$(MAKE) -f pipelines/align.mk W=$(DEMO_DIR) DEVICE=$(DEMO_DEVICE) $(DEMO_ALIGN)
	@echo; echo "== samples ($(DEMO_DIR)/samples.txt)"; cat $(DEMO_DIR)/samples.txt
	@echo; echo "== held-out accuracy ($(DEMO_DIR)/align/report.txt)"; tail -2 $(DEMO_DIR)/align/report.txt
	@echo; echo "loss curve: $(DEMO_DIR)/loss.png  reward curve: $(DEMO_DIR)/align/reward.png"
	@s=$$(( $$(date +%s) - $$(cat $(DEMO_DIR)/.started) )); \
	 echo "demo: $$((s / 60)) min $$((s % 60)) s (stages already done are not redone)"

# Regenerate the committed Unicode class table (needs Debian's unicode-data).
UNICODE_DIR ?= /usr/share/unicode
unicode:
	awk -f libcommon/text/gen_unicode.awk $(UNICODE_DIR)/PropList.txt $(UNICODE_DIR)/UnicodeData.txt \
		> libcommon/text/unicode_tab.c.tmp && mv libcommon/text/unicode_tab.c.tmp libcommon/text/unicode_tab.c

-include $(OBJ:.o=.d) $(wildcard $(FZ)/*/*.d $(FZ)/*/*/*.d)
