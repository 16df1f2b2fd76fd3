# pipelines/align.mk: align a pretrained model on verifiable arithmetic, after
# pipelines/pretrain.mk (same W, same tokenizer):
#
#   lm-task arith --> sft.jsonl --rl-update --algo sft--> sft/latest
#   round k: prompts --lm-sample --jsonl -n GROUP--> rollouts --rl-reward--> scored
#            --rl-update (GRPO family)--> round-k/latest
#   held-out test problems: accuracy of base, SFT and final model --> eval.txt;
#   mean reward per round --> reward.png
#
#   make -f pipelines/align.mk W=work ROUNDS=5 GROUP=8 DIGITS=1 LOSS=grpo_clip
#
# Each stage is a file target; a stage can be replaced by your own program
# through its command variable (TASK, SFT, SAMPLE, REWARD, UPDATE), e.g.
# REWARD='rl-reward --cmd ./my-scorer' for an external reward model.

ROOT    := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BIN     ?= $(ROOT)/bin
W       ?= work
A       ?= $(W)/align
BASE    ?= $(W)/ckpt/latest
TOK     ?= $(W)/tok.bpe
TEMPLATE ?= $(ROOT)/pipelines/arith.prompt
SEED    ?= 1
DIGITS  ?= 1
OPS     ?= +-
SFT_N   ?= 2000
SFT_EPOCHS ?= 2
SFT_LR  ?= 1e-3
ROUNDS  ?= 3
PROMPTS_PER_ROUND ?= 32
GROUP   ?= 8
RL_LR   ?= 3e-4
LOSS    ?= reinforce_with_baseline
TEST_N  ?= 200
MAX_TOKENS ?= 24
DEVICE  ?= cpu

TASK   ?= $(BIN)/lm-task arith --digits $(DIGITS) --ops '$(OPS)' --template $(TEMPLATE)
SFT    ?= $(BIN)/rl-update --algo sft -t $(TOK) -e $(SFT_EPOCHS) --lr $(SFT_LR) --device $(DEVICE)
SAMPLE ?= $(BIN)/lm-sample -t $(TOK) --jsonl --max-tokens $(MAX_TOKENS) --stop '</answer>' --device $(DEVICE)
REWARD ?= $(BIN)/rl-reward -r r1-zero
UPDATE ?= $(BIN)/rl-update -l $(LOSS) --lr $(RL_LR) --device $(DEVICE)

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DELETE_ON_ERROR:
.PHONY: align
align: $(A)/eval.txt $(A)/reward.png

$(A)/sft.jsonl:
	@mkdir -p $(@D)
	$(TASK) -n $(SFT_N) -s $(SEED) -r -o $@

$(A)/prompts.jsonl:
	@mkdir -p $(@D)
	$(TASK) -n $$(( $(ROUNDS) * $(PROMPTS_PER_ROUND) )) -s $$(( $(SEED) + 1 )) -o $@

$(A)/test.jsonl:
	@mkdir -p $(@D)
	$(TASK) -n $(TEST_N) -s $$(( $(SEED) + 2 )) -o $@

$(A)/sft/latest: $(A)/sft.jsonl $(BASE)
	rm -rf $(@D)
	$(SFT) -c $(BASE) -o $(@D) $(A)/sft.jsonl > $(A)/sft.metrics.json

# Round k samples GROUP completions of its slice of the prompts from the
# model of round k-1 (round 0 is the SFT model), scores them and updates.
prev = $(if $(filter 1,$(1)),$(A)/sft/latest,$(A)/round-$(shell expr $(1) - 1)/latest)
define round
$(A)/round-$(1)/scored.jsonl: $(call prev,$(1)) $(A)/prompts.jsonl
	@mkdir -p $$(@D)
	awk -v k=$(1) -v p=$(PROMPTS_PER_ROUND) 'NR > (k - 1) * p && NR <= k * p' $(A)/prompts.jsonl \
		| $$(SAMPLE) -c $(call prev,$(1)) -n $(GROUP) -s $(shell expr $(SEED) \* 1000 + $(1)) \
		| $$(REWARD) > $$@
$(A)/round-$(1)/latest: $(A)/round-$(1)/scored.jsonl
	rm -f $$(@D)/latest $$(@D)/step-*.safetensors
	$$(UPDATE) -c $(call prev,$(1)) -o $$(@D) $$< > $$(@D)/metrics.json
endef
$(foreach k,$(shell seq 1 $(ROUNDS)),$(eval $(call round,$(k))))
FINAL := $(A)/round-$(ROUNDS)/latest

$(A)/rounds.jsonl: $(FINAL)
	cat $(foreach k,$(shell seq 1 $(ROUNDS)),$(A)/round-$(k)/metrics.json) > $@

$(A)/reward.png: $(A)/rounds.jsonl
	$(ROOT)/pipelines/plot-metrics.sh reward $< $@

# Greedy accuracy on held-out problems: the mean answer reward.
accuracy = $(SAMPLE) -c $(1) --temperature 0 < $(A)/test.jsonl | $(REWARD) \
	| sed -n 's/.*"answer_reward":\([0-9.eE+-]*\).*/\1/p' | awk '{ s += $$1; n++ } END { printf "%.3f\n", n ? s / n : 0 }'
$(A)/eval.txt: $(A)/test.jsonl $(BASE) $(A)/sft/latest $(FINAL)
	{ printf 'base  %s\n' "$$($(call accuracy,$(BASE)))"; \
	  printf 'sft   %s\n' "$$($(call accuracy,$(A)/sft/latest))"; \
	  printf 'final %s\n' "$$($(call accuracy,$(FINAL)))"; } > $@.tmp
	mv $@.tmp $@
	cat $@
