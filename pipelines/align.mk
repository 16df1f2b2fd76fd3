# pipelines/align.mk: align a pretrained model on verifiable arithmetic, after
# pipelines/pretrain.mk (same W: its checkpoint and tokenizer), one file
# target per stage:
#
#   lm-task arith --> train.jsonl --rl-update -a sft--> sft/latest
#   round k: lm-task (fresh prompts) | lm-sample --jsonl -n G | rl-reward
#            --> round-k/scored.jsonl --rl-update (GRPO family)--> round-k/latest
#   after every stage: greedy accuracy on held-out test.jsonl --> eval-STAGE.json
#   --> log.jsonl, report.txt;  per-round metrics --> rounds.jsonl, reward.png
#
#   make -f pipelines/align.mk W=work ROUNDS=5 G=8 DIGITS=1 GRPO_LOSS=grpo_clip
#   make -f pipelines/align.mk BASE=ck/latest TOK=tok.bpe A=align-run
#   make -f pipelines/align.mk W=work DEVICE=cuda     (the loop on the GPU)
#   make -f pipelines/align.mk W=work UPDATE_OPTS='--no-std --agg normalize'  (Dr. GRPO)
#
# A stage can be replaced by your own program through its command variable
# (TASK, TEST_TASK, SFT, SAMPLE, REWARD, UPDATE), e.g. REWARD='$(BIN)/rl-reward --cmd
# ./my-scorer' for an external reward model.

ROOT    := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BIN     ?= $(ROOT)/bin
W       ?= work
A       ?= $(W)/align
BASE    ?= $(W)/ckpt/latest
TOK     ?= $(W)/tok.bpe
TEMPLATE ?= $(ROOT)/pipelines/arith.prompt
DEVICE  ?= cpu
# The updates (rl-update) run on DEVICE, and so do the rollouts and the
# held-out evaluation (lm-sample) unless SAMPLE_DEVICE says otherwise;
# scoring (rl-reward) and the problems (lm-task) are host programs.  With
# DEVICE=cuda the whole loop (sample, score, update) runs against the GPU,
# each update's micro-batches MICRO_BATCH sequences (more on a GPU).
SAMPLE_DEVICE ?= $(DEVICE)
MICRO_BATCH ?= $(if $(filter cuda,$(DEVICE)),64,8)
# sequences lm-sample decodes together for the rollouts: on CUDA 512
# (one ts-shape round of 256 x 8 samples in 2.05 s, against 3.36 s at
# lm-sample's default of 64; bench/rl-round.sh); elsewhere its default
ROLLOUT_BATCH ?= $(if $(filter cuda,$(SAMPLE_DEVICE)),512,)
DIGITS  ?= 1
ARITH_STEPS ?= 1
OPS     ?= +-
N_TRAIN ?= 2000
N_TEST  ?= 200
SFT_EPOCHS ?= 2
SFT_BATCH  ?= 16
SFT_LR  ?= 1e-3
ROUNDS  ?= 3
PROMPTS ?= 32
G       ?= 8
GRPO_LR ?= 1e-4
GRPO_BATCH ?= 64
GRPO_EPOCHS ?= 1
GRPO_LOSS ?= grpo_clip
MAX_TOKENS ?= 40

TASK   ?= $(BIN)/lm-task arith -d $(DIGITS) --steps $(ARITH_STEPS) --ops '$(OPS)' \
          $(if $(TEMPLATE),-t $(TEMPLATE))
# the held-out problems: TASK's with another seed, or a set of their own,
# e.g. GSM8K (lm-task gsm8k draws by the seed, -s, that each use passes):
#   TASK='$(BIN)/lm-task gsm8k -t $(TEMPLATE) gsm8k/train.jsonl' \
#   TEST_TASK='$(BIN)/lm-task gsm8k -t $(TEMPLATE) gsm8k/test.jsonl'
TEST_TASK ?= $(TASK)
# what the report calls the problems
TASK_NAME ?= DIGITS=$(DIGITS) ARITH_STEPS=$(ARITH_STEPS) OPS=$(OPS)
PROGRESS ?= --progress
SFT    ?= $(BIN)/rl-update -a sft -t $(TOK) -e $(SFT_EPOCHS) -b $(SFT_BATCH) --lr $(SFT_LR) \
          --device $(DEVICE) -m $(MICRO_BATCH) $(PROGRESS)
SAMPLE ?= $(BIN)/lm-sample -t $(TOK) --jsonl --max-tokens $(MAX_TOKENS) --stop '</answer>' \
          --device $(SAMPLE_DEVICE)
REWARD ?= $(BIN)/rl-reward -r r1-zero
UPDATE ?= $(BIN)/rl-update -l $(GRPO_LOSS) -b $(GRPO_BATCH) -e $(GRPO_EPOCHS) --lr $(GRPO_LR) \
          --device $(DEVICE) -m $(MICRO_BATCH) $(UPDATE_OPTS) $(PROGRESS)
EVAL    = BIN=$(BIN) TOK=$(TOK) DEVICE=$(SAMPLE_DEVICE) MAX_TOKENS=$(MAX_TOKENS) $(ROOT)/pipelines/align-eval.sh

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DELETE_ON_ERROR:
.PHONY: align
align: $(A)/report.txt $(A)/reward.png

$(A)/t0:
	@mkdir -p $(@D)
	date +%s > $@

$(A)/train.jsonl: | $(A)/t0
	$(TASK) -n $(N_TRAIN) -s 1 -r -o $@

$(A)/test.jsonl: | $(A)/t0
	$(TEST_TASK) -n $(N_TEST) -s 2 -o $@

$(A)/eval-base.json: $(BASE) $(A)/test.jsonl
	$(EVAL) $(BASE) base $(A)

$(A)/sft/latest: $(A)/train.jsonl $(BASE)
	rm -rf $(@D)
	$(SFT) -c $(BASE) -o $(@D) $(A)/train.jsonl > $(A)/sft-metrics.json

$(A)/eval-sft.json: $(A)/sft/latest $(A)/test.jsonl
	$(EVAL) $< sft $(A)

# Round k samples G completions of fresh prompts (seed 100 + k, never the
# test seed) from the model of round k-1 (round 0 is the SFT model), scores
# them and updates.
prev = $(if $(filter 1,$(1)),$(A)/sft/latest,$(A)/round-$(shell expr $(1) - 1)/latest)
define round
$(A)/round-$(1)/scored.jsonl: $(call prev,$(1))
	@mkdir -p $$(@D)
	$$(TASK) -n $(PROMPTS) -s $(shell expr 100 + $(1)) \
		| $$(SAMPLE) -c $(call prev,$(1)) -n $(G) -s $(1) $(if $(ROLLOUT_BATCH),--batch $(ROLLOUT_BATCH)) \
		| $$(REWARD) > $$@
$(A)/round-$(1)/latest: $(A)/round-$(1)/scored.jsonl
	rm -f $$(@D)/latest $$(@D)/step-*.safetensors
	$$(UPDATE) -c $(call prev,$(1)) -o $$(@D) $$< > $$(@D)/metrics.json
$(A)/eval-grpo-$(1).json: $(A)/round-$(1)/latest $(A)/test.jsonl
	$$(EVAL) $$< grpo-$(1) $(A)
endef
ROUND_NUMBERS := $(shell seq 1 $(ROUNDS))
$(foreach k,$(ROUND_NUMBERS),$(eval $(call round,$(k))))

EVALS := $(A)/eval-base.json $(A)/eval-sft.json $(foreach k,$(ROUND_NUMBERS),$(A)/eval-grpo-$(k).json)
$(A)/log.jsonl: $(EVALS)
	cat $^ > $@

# The report ends with the comparison the stages are for: SFT against the
# base model, the last GRPO round against SFT.
$(A)/report.txt: $(A)/log.jsonl
	{ echo "held-out accuracy on $(N_TEST) problems ($(TASK_NAME)):"; \
	  sed 's/^{"stage":"\([^"]*\)","accuracy":\([^,]*\),"format":\([^,]*\),"seconds":\([0-9]*\)}/  \1: accuracy \2, format \3, at \4 s/' $<; \
	  sed 's/^{"stage":"\([^"]*\)","accuracy":\([^,]*\),.*/\1 \2/' $< | awk -v n=$(N_TEST) ' \
	    { acc[NR] = $$2; name[NR] = $$1 } \
	    END { printf "SFT: %s -> %s (%+.2f, %+d of %d problems)\n", acc[1], acc[2], acc[2] - acc[1], \
	                 (acc[2] - acc[1]) * n + (acc[2] >= acc[1] ? 0.5 : -0.5), n; \
	          if (NR > 2) printf "GRPO, %d rounds: %s -> %s (%+.2f, %+d of %d problems)\n", NR - 2, \
	                 acc[2], acc[NR], acc[NR] - acc[2], \
	                 (acc[NR] - acc[2]) * n + (acc[NR] >= acc[2] ? 0.5 : -0.5), n }'; \
	} > $@
	cat $@

$(A)/rounds.jsonl: $(foreach k,$(ROUND_NUMBERS),$(A)/round-$(k)/latest)
	cat $(foreach k,$(ROUND_NUMBERS),$(A)/round-$(k)/metrics.json) > $@

$(A)/reward.png: $(A)/rounds.jsonl $(A)/log.jsonl
	$(ROOT)/pipelines/plot-metrics.sh reward $< $@ $(A)/log.jsonl
