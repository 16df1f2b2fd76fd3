# pipelines/data.mk: a corpus of many files to one tokenizer and token shards,
# on many cores or hosts, resumable, and the same bytes whatever the parallelism.
#
#   INPUTS --plan--> pieces --[doc-cat |] bpe-encode --pretokenize --counts-out-->
#             counts/NNNNNN.counts, pre/NNNNNN.pre
#          --bpe-learn --from-counts--> tok.bpe
#          --bpe-encode --from-pretok | shard-pack--> shards/NNNNNN/train-*.lms, train.manifest
#          --> manifest.tsv (the pieces' set manifests, in plan order)
#
#   make -f pipelines/data.mk -j 16 W=runs/data INPUTS='corpus/*.jsonl.zst' FORMAT=jsonl VOCAB=32000
#   make -f pipelines/data.mk W=/shared/data INPUTS=/shared/corpus/ LAUNCH=slurm N=64 \
#        SBATCH_OPTS='--partition=cpu --cpus-per-task=8' TASK_JOBS=8
#
# The input is cut into pieces that depend on the files and PIECE_BYTES alone:
# a file of at most PIECE_BYTES (or a compressed one) is one piece, a larger plain
# file is cut into byte ranges that each hold the documents starting in them
# (doc-cat --range).  Every output is per piece, so the tokenizer, the shards and
# the manifest are the same bytes whatever N, -j or LAUNCH; a document goes to
# validation by a hash of its tokens and SEED (shard-pack --val-by-content).
# A task is a set of pieces (i, i+N, ...): under LAUNCH each task is a make of its
# pieces run by the engine; without LAUNCH the pieces are this make's own jobs (-j).
# Every output is written under a temporary name and renamed when whole, and
# stamps under W/params/ hold the parameters of each stage: a killed run resumes
# where it stopped, a finished run does nothing, a changed parameter redoes what
# depends on it.  See doc-cat(1) and README.md ("The data pipeline").
#
# Past GROUP pieces, the counts are first summed in groups (bpe-learn --from-counts
# --counts-out, make jobs of this host) so that the tokenizer reads a few files.
#
# The text is pre-tokenized once: the counts task keeps each piece's text as
# the sequence of its distinct pre-tokens (W/pre, man 5 lmpipe-pretok, about
# the size of the text) beside their counts (the same bytes as bpe-learn
# --counts-out's), and the shards task encodes each distinct pre-token once
# and packs: the same ids as bpe-encode on the text.  PRE=0 (the default
# when THREADS > 1: pre-tokens are made on one thread) reads the text again
# in the shards stage instead (bpe-learn counts, bpe-encode encodes; no
# W/pre); tests/data-pipeline.t checks that both give the same bytes.  A
# change of VOCAB redoes neither counts nor pre-tokens.
#
# Why pieces and not tasks as the unit of output: outputs per task would change
# with N.  Why no global shuffle of documents: the shard reader samples random
# windows, and a shuffle would be an all-to-all stage.  Why a file of its own and
# not a part of pretrain.mk: pretrain.mk stays the short path from one corpus to
# a model; lm-train reads this pipeline's shards through W/lm-train.args.

ifeq ($(filter grouped-target,$(.FEATURES)),)
$(error pipelines/data.mk needs GNU make 4.3 or later (grouped targets); this is $(MAKE_VERSION))
endif
ROOT   := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
SELF   := $(abspath $(lastword $(MAKEFILE_LIST)))
BIN    ?= $(ROOT)/bin
W      ?= data
override W := $(abspath $(W))
ifneq ($(words $(W)),1)
$(error W=$(W): a folder name with blanks, which make cannot take)
endif
ifneq ($(findstring %,$(W))$(findstring :,$(W)),)
$(error W=$(W): a folder name with '%' or ':', which make cannot take in a target)
endif
INPUTS ?=
FORMAT ?= text
SEP    ?= eot
FIELD  ?= text
SPECIAL ?= <|endoftext|>
PIECE_BYTES ?= 8Mi
GROUP  ?= 64
VOCAB  ?= 1024
VAL_FRACTION ?= 0.01
SEED   ?= 1
SHARD_TOKENS ?= 100000000
FRAME_TOKENS ?= 8192
LEVEL  ?= 3
THREADS ?= 1
# (empty: bpe-learn's own default, every core allowed, without a nproc a run)
MERGE_THREADS ?=
LAUNCH ?=
N      ?= 4
TASK_JOBS ?= 1
SBATCH_OPTS ?=
SRUN_OPTS ?=
SSHLOGIN ?= :
PARALLEL_JOBS ?= 1
SLURM_POLL ?= 1
V      ?= 0
# (one thread a piece: with THREADS > 1, for few large pieces, the text is
# counted and encoded on threads instead)
PRE    ?= $(if $(filter 1,$(THREADS)),1,0)

DOCS   = $(BIN)/doc-cat --format $(FORMAT) --sep $(SEP) --field $(FIELD) --eot '$(SPECIAL)'
LEARN  = $(BIN)/bpe-learn --special '$(SPECIAL)'
ENCODE = $(BIN)/bpe-encode -t $(W)/tok.bpe -j $(THREADS)
PRETOK = $(BIN)/bpe-encode --pretokenize --special '$(SPECIAL)'
PACK   = $(BIN)/shard-pack --allow-empty --val-fraction $(VAL_FRACTION) --val-by-content \
         --seed $(SEED) --shard-tokens $(SHARD_TOKENS) --frame-tokens $(FRAME_TOKENS) \
         --level $(LEVEL) -j $(THREADS)

, := ,
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
Q := $(if $(filter 1,$(V)),,@)
# No built-in rules: make tried every one of them (RCS, SCCS, %.c, ...) on
# each input, stamp and program the pipeline names, ~8 ms a pass of make on
# the 2-core machine (a no-op run 15-21 -> 5-7.5 ms), on the serial path.
MAKEFLAGS += --no-builtin-rules
.SUFFIXES:
export BIN
.PHONY: all data counts tok shards verify task-counts task-shards
.PRECIOUS: $(W)/counts/%.counts $(W)/pre/%.pre $(W)/shards/%/manifest.tsv
all: data

# ---- parameters: one stamp per stage, rewritten only when its text changes ----
eq = $(and $(findstring x$1,x$2),$(findstring x$2,x$1))
# $(call rewrite,FILE,TEXT): FILE holds TEXT, rewritten only when it differs
# (its text read into a variable first: GNU make 4.3 compared a $(file <)
# inside $(findstring) wrongly after some $(shell)s, rewriting it every run)
rewrite = $(eval old_text := $$(file < $1))$(if $(call eq,$(old_text),$2),,$(file > $1,$2))
stamp = $(call rewrite,$(W)/params/$1,$2)
DOC_PARAMS := FORMAT=$(FORMAT) SEP=$(SEP) FIELD=$(FIELD) SPECIAL=$(SPECIAL)

# the time in seconds with 6 decimals, from bash's clock (no process started)
NOW = $${EPOCHREALTIME:-$$(date +%s.%6N)}
# $(call summary,STAGE,TEXT): one line per stage on stderr, with its time since t0
summary = { [ -t 2 ] && printf '\r\033[K'; t1=$(NOW); t1=$${t1/[.,]/}; t0=$${t0/[.,]/}; \
  printf 'data.mk: %s: %s, %d.%03d s\n' $1 "$2" $$(((t1 - t0) / 1000000)) $$(((t1 - t0) / 1000 % 1000)); } >&2

# What a task (a make started by LAUNCH, without this make's command line) needs.
define PARAMS_MK
BIN := $(BIN)
FORMAT := $(FORMAT)
SEP := $(SEP)
FIELD := $(FIELD)
SPECIAL := $(SPECIAL)
VAL_FRACTION := $(VAL_FRACTION)
SEED := $(SEED)
SHARD_TOKENS := $(SHARD_TOKENS)
FRAME_TOKENS := $(FRAME_TOKENS)
LEVEL := $(LEVEL)
THREADS := $(THREADS)
V := $(V)
PRE := $(PRE)
endef

ifeq ($(TASK),)
# ---- the driver: plan, stages, launching ----
ifeq ($(strip $(INPUTS)),)
$(error INPUTS is empty: give files, globs or directories, e.g. INPUTS='corpus/*.txt')
endif
ifeq ($(MAKE_RESTARTS),)
# (the folder made in the same shell as the list: each $(shell) is a bash
# started on the serial path of every run)
INPUT_FILES := $(shell $(if $(wildcard $(W)/params/.),,mkdir -p $(W)/params && )\
  $(ROOT)/pipelines/data-inputs.sh $(W)/inputs.txt $(INPUTS) || echo /FAILED/)
else
# make restarted after remaking plan.mk: the list the first pass wrote a
# moment ago (data-inputs.sh again costs a dozen processes)
INPUT_FILES := $(strip $(file < $(W)/inputs.txt))
endif
ifneq ($(filter /FAILED/,$(INPUT_FILES)),)
$(error the inputs cannot be listed (see above))
endif
$(call stamp,plan,PIECE_BYTES=$(PIECE_BYTES) GROUP=$(GROUP) $(DOC_PARAMS))
$(call stamp,counts,$(DOC_PARAMS) PRE=$(PRE))
$(call stamp,tok,VOCAB=$(VOCAB) SPECIAL=$(SPECIAL))
$(call stamp,shards,$(DOC_PARAMS) VAL_FRACTION=$(VAL_FRACTION) SEED=$(SEED) \
  SHARD_TOKENS=$(SHARD_TOKENS) FRAME_TOKENS=$(FRAME_TOKENS) LEVEL=$(LEVEL))
$(call rewrite,$(W)/params.mk,$(PARAMS_MK))

PLAN = t0=$(NOW); BIN=$(BIN) $(ROOT)/pipelines/data-plan.sh $(W) $(PIECE_BYTES) $(GROUP) --format $(FORMAT) \
  --sep $(SEP) --eot '$(SPECIAL)' && \
  { mapfile -t plan < $(W)/plan.tsv; } && \
  $(call summary,plan,$${#plan[@]} pieces of $(words $(INPUT_FILES)) files)
$(W)/plan.mk: $(W)/inputs.txt $(W)/params/plan $(INPUT_FILES) $(BIN)/doc-cat
	$(Q)$(PLAN)
# A run from nothing makes its plan now, as make reads this file, not by the
# rule above and a restart of make (which reads this file and the plan again:
# ~2 ms, and a bash, on the serial path); later runs remake it by the rule.
ifeq ($(wildcard $(W)/plan.mk),)
ifneq ($(shell $(PLAN) || echo /FAILED/),)
$(error the inputs cannot be planned (see above))
endif
endif
include $(W)/plan.mk

COUNTS := $(PIECES:%=$(W)/counts/%.counts)
SHARDS := $(PIECES:%=$(W)/shards/%/manifest.tsv)
PRES   := $(if $(filter 1,$(PRE)),$(PIECES:%=$(W)/pre/%.pre))
# the tokenizer's counts: the pieces', or, past GROUP pieces, their groups' sums
TOK_COUNTS := $(if $(GROUPS),$(GROUPS:%=$(W)/counts/group-%.counts),$(COUNTS))
# (the input's bytes: the plan's pieces' documents add up to each file's size)
IN_BYTES = $(PLAN_BYTES)
SHARDS_TOTALS = $$(awk -F'\t' '{t+=$$4; d+=$$5; b+=$$6} \
  END {printf "%d tokens, %d documents, %d bytes of shards", t, d, b}' $(SHARDS))

# $(call launch_$(LAUNCH),STAGE): build the task-STAGE targets by the engine.
TASK_MAKE = env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $(MAKE) -f $(SELF) --no-print-directory \
  -k -j $(TASK_JOBS) W=$(W) N=$(N)
# (the array is watched with squeue every SLURM_POLL seconds: sbatch --wait
# polls every 10; whether a task failed is told by its outputs, see check)
launch_slurm = mkdir -p $(W)/logs && jid=$$(sbatch --parsable --array=0-$$(($(N) - 1)) \
  --job-name=data-$1 --output=$(W)/logs/$1-%a.log $(SBATCH_OPTS) \
  --wrap='$(TASK_MAKE) TASK=$$SLURM_ARRAY_TASK_ID task-$1') && \
  while squeue -h -j $${jid%%;*} 2> /dev/null | grep -q .; do sleep $(SLURM_POLL); done
launch_srun = srun --ntasks=$(N) $(SRUN_OPTS) bash -c '$(TASK_MAKE) TASK=$$SLURM_PROCID task-$1'
launch_parallel = seq 0 $$(($(N) - 1)) | parallel --will-cite --halt never --jobs $(PARALLEL_JOBS) \
  --sshlogin '$(SSHLOGIN)' 'cd $(CURDIR) && $(TASK_MAKE) TASK={} task-$1'
ifeq ($(if $(LAUNCH),$(filter undefined,$(origin launch_$(LAUNCH)))),undefined)
$(error LAUNCH=$(LAUNCH): expected nothing, slurm, srun or parallel)
endif
# after the engine: every piece's output must be there
check = for f in $1; do [ -e $$f ] || { echo "data.mk: $$f missing: a task failed (see above$(if \
  $(LAUNCH),$(,) and $(W)/logs))" >&2; exit 1; }; done

data: $(W)/manifest.tsv
tok: $(W)/tok.bpe

ifneq ($(PIECES),)
ifeq ($(LAUNCH),)
# On this host the pieces are this make's own jobs: largest first, the
# others carried on when one fails (-k), and no make between (a sub-make
# cost ~10 ms a stage at -j 16).  A stage's summary is the recipe of its
# stamp W/params/STAGE.done, made after its pieces, and timed from the first
# piece this run started (which notes make's process id and the time in
# W/params/STAGE.t0).
MAKEFLAGS += -k
COUNTS_DONE := $(W)/params/counts.done
SHARDS_DONE := $(W)/params/shards.done
counts: $(COUNTS_DONE)
shards: $(SHARDS_DONE)
$(COUNTS_DONE): $(PIECES_BY_SIZE:%=$(W)/counts/%.counts) $(PRES)
	$(Q){ read -r pid t0 < $(W)/params/counts.t0; } 2> /dev/null && [ "$$pid" = $$PPID ] || \
	  t0=$(NOW); : > $@; \
	  $(call summary,counts,$(words $(PIECES)) pieces$(,) $(IN_BYTES) bytes)
$(SHARDS_DONE): $(PIECES_BY_SIZE:%=$(W)/shards/%/manifest.tsv)
	$(Q){ read -r pid t0 < $(W)/params/shards.t0; } 2> /dev/null && [ "$$pid" = $$PPID ] || \
	  t0=$(NOW); : > $@; \
	  $(call summary,shards,$(words $(PIECES)) pieces$(,) $(SHARDS_TOTALS))
else
counts: $(COUNTS)
shards: $(SHARDS)
$(COUNTS) $(PRES) &: $(W)/params/counts $(W)/plan.tsv
	+$(Q)t0=$(NOW); $(call launch_$(LAUNCH),counts) || true; $(call check,$(COUNTS) $(PRES)); \
	  $(call summary,counts,$(words $(PIECES)) pieces$(,) $(IN_BYTES) bytes)
endif

$(W)/counts/group-%.counts: $(W)/params/counts
	$(Q)rm -f $@.tmp && $(LEARN) -j $(THREADS) --from-counts --counts-out $@.tmp \
	  $(filter %.counts,$^) && mv $@.tmp $@

# (-o itself, no mv: bpe-learn writes it under a temporary name and renames
# it when whole)
$(W)/tok.bpe: $(COUNTS_DONE) $(TOK_COUNTS) $(W)/params/tok
	$(Q)t0=$(NOW); $(LEARN) $(if $(MERGE_THREADS),-j $(MERGE_THREADS)) --from-counts -v $(VOCAB) \
	  -o $@ $(TOK_COUNTS) && \
	  $(call summary,tokenizer,vocabulary $(VOCAB) from $(words $(TOK_COUNTS)) counts files)

ifneq ($(LAUNCH),)
$(SHARDS) &: $(W)/tok.bpe $(W)/params/shards $(W)/plan.tsv $(PRES)
	+$(Q)t0=$(NOW); $(call launch_$(LAUNCH),shards) || true; $(call check,$(SHARDS)); \
	  $(call summary,shards,$(words $(PIECES)) pieces$(,) $(SHARDS_TOTALS))
endif
endif

# (data-manifest.sh says the number of shards and the totals: the summary
# reads the manifest again by no grep or awk)
$(W)/manifest.tsv: $(SHARDS_DONE) $(SHARDS) $(W)/plan.tsv
	$(Q)t0=$(NOW); sum=$$($(ROOT)/pipelines/data-manifest.sh all $(W) $@.tmp) && \
	  mv $(W)/lm-train.args.tmp $(W)/lm-train.args && mv $@.tmp $@ && \
	  n=$${sum%%$$'\n'*} totals=$${sum#*$$'\n'} && \
	  $(call summary,manifest,$$n shards) && \
	  { [ "$$totals" = "$$sum" ] || while IFS=$$'\t' read -r _ s k t d b; do \
	  printf 'data.mk: total: %s %s, %s tokens, %s documents, %s bytes\n' "$$s" "$$k" "$$t" "$$d" "$$b"; \
	  done <<< "$$totals" >&2; }

# Every shard again: its size and header checksum against the manifest, then
# its frames and index against the header (shard-pack -t).
verify: $(W)/manifest.tsv
	$(Q)$(ROOT)/pipelines/data-manifest.sh verify $(W)
	@echo "data.mk: every shard of $(W)/manifest.tsv verified" >&2

else
# ---- a task: the pieces i with i mod N = TASK (all of them for TASK=all) ----
include $(W)/params.mk
include $(W)/plan.mk
ifeq ($(TASK),all)
TASK_PIECES := $(PIECES)
else
TASK_PIECES := $(foreach i,$(shell seq $$(($(TASK) + 1)) $(N) $(words $(PIECES))),$(word $(i),$(PIECES)))
endif
# built largest first (make starts prerequisites in order): with -j, no job
# slot is left with a long piece when the others are done
TASK_PIECES := $(filter $(TASK_PIECES),$(or $(PIECES_BY_SIZE),$(PIECES)))
task-counts: $(TASK_PIECES:%=$(W)/counts/%.counts)
task-shards: $(TASK_PIECES:%=$(W)/shards/%/manifest.tsv)
endif

# The programs of a piece draw no progress bars of their own (their stderr is
# not the terminal); the pipeline draws, on a terminal, the pieces of the
# stage done so far.
# (only when make's stderr is a terminal: else they draw none anyway, and
# the cat would be one more process a piece)
NOTTY = $(if $(MAKE_TERMERR),2>&1 | cat >&2)
# $(call stage_t0,STAGE): the first piece of STAGE this run notes the time
# (for the summary of the driver's own jobs, not in a task of an engine),
# with the make's process id, a recipe's $PPID, so that a killed run's is
# not taken for this one's (one file a stage, rewritten by the next run: no
# rm on the serial path)
stage_t0 = $(if $(TASK),,{ read -r pid _ < $(W)/params/$1.t0; } 2> /dev/null || pid=; \
  [ "$$pid" = $$PPID ] || echo "$$PPID $(NOW)" > $(W)/params/$1.t0;)
progress = [ -t 2 ] && printf '\rdata.mk: %s: %d/%d pieces ' $1 \
  $$(ls $2 2>/dev/null | wc -l) $(words $(PIECES)) >&2 || true

ifeq ($(PRE),1)
# one task makes both (a pattern rule of two targets runs once for them)
$(W)/counts/%.counts $(W)/pre/%.pre: $(W)/params/counts
	$(Q)$(call stage_t0,counts) mkdir -p $(W)/counts $(W)/pre && rm -f $(W)/counts/$*.counts.tmp $(W)/counts/.$*.counts.tmp.tmp-*
	$(Q)($(call piece_text,$*,$(PRETOK) --counts-out $(W)/counts/$*.counts.tmp) \
	  > $(W)/pre/$*.pre.tmp) $(NOTTY) || \
	  { rm -f $(W)/counts/$*.counts.tmp $(W)/pre/$*.pre.tmp; exit 1; }
	$(Q)mv $(W)/pre/$*.pre.tmp $(W)/pre/$*.pre && mv $(W)/counts/$*.counts.tmp $(W)/counts/$*.counts; \
	  $(call progress,counts,$(W)/counts/*.counts)
else
$(W)/counts/%.counts: $(W)/params/counts
	$(Q)$(call stage_t0,counts) mkdir -p $(@D) && rm -f $@.tmp $(@D)/.$(@F).tmp.tmp-*
	$(Q)($(DOCS) --range '$(RANGE_$*)' $(FILE_$*) | $(LEARN) -j $(THREADS) --counts-out $@.tmp) $(NOTTY) || \
	  { rm -f $@.tmp; exit 1; }
	$(Q)mv $@.tmp $@; $(call progress,counts,$(W)/counts/*.counts)
endif

# $(call piece_text,ID,CMD): CMD (a bpe-encode) on the documents of piece ID:
# a cut of end-of-text separated text is read in place (bpe-encode -r: the
# same bytes as doc-cat -r, without its process and pipe: at -j 16 the pipes
# slow every core), other pieces through doc-cat (formats, decompression)
IN_PLACE := $(and $(filter text,$(FORMAT)),$(filter eot,$(SEP)),$(filter <|endoftext|>,$(SPECIAL)))
piece_text = $(if $(and $(IN_PLACE),$(CUT_$1)),$2 -r '$(RANGE_$1)' $(FILE_$1),\
  $(DOCS) --range '$(RANGE_$1)' $(FILE_$1) | $2)
# the text of a piece: its pre-tokens, or (PRE=0) its documents pre-tokenized here
piece_ids = $(if $(filter 1,$(PRE)),$(ENCODE) --from-pretok $(W)/pre/$1.pre,\
  $(call piece_text,$1,$(ENCODE)))

$(W)/shards/%/manifest.tsv: $(W)/tok.bpe $(W)/params/shards $(if $(filter 1,$(PRE)),$(W)/pre/%.pre)
	$(Q)$(call stage_t0,shards) rm -rf $(W)/shards/$*.tmp && mkdir -p $(W)/shards/$*.tmp
	$(Q)($(call piece_ids,$*) | $(PACK) -o $(W)/shards/$*.tmp/train) \
	  $(NOTTY) || { rm -rf $(W)/shards/$*.tmp; exit 1; }
	$(Q)$(ROOT)/pipelines/data-manifest.sh piece $(W) $* $(W)/shards/$*.tmp > $(W)/shards/$*.tmp/manifest.tsv
	$(Q)rm -rf $(W)/shards/$* && mv $(W)/shards/$*.tmp $(W)/shards/$*
	$(Q)$(call progress,shards,$(W)/shards/*/manifest.tsv)
