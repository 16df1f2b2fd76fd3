# pipelines/align.mk: align a pretrained model on verifiable arithmetic:
# held-out accuracy of the base model, SFT on worked solutions, then ROUNDS
# rounds of GRPO (lm-sample G rollouts per prompt -> rl-reward -> rl-update),
# the held-out accuracy measured after every stage and logged.
#
#   make -f pipelines/align.mk BASE=ck/latest TOK=tok.bin OUT=align
#
# Everything lands in $(OUT): train.jsonl and test.jsonl (problems),
# sft/ and grpo/ (checkpoints; latest -> newest), rounds/ (rollouts and
# metrics of each round), log.jsonl (one line per stage: stage, accuracy on
# test.jsonl, format rate, seconds since the start) and report.txt.
# Knobs: task difficulty (DIGITS, STEPS, OPS), sizes (N_TRAIN, N_TEST,
# PROMPTS per round, G samples per prompt), SFT_* and GRPO_* settings,
# TEMPLATE (a prompt template file; default the built-in r1-zero prompt).

BASE     ?= $(error set BASE=checkpoint of the pretrained model)
TOK      ?= $(error set TOK=its tokenizer file)
OUT      ?= align
BIN      ?= bin
DEVICE   ?= cpu
DIGITS   ?= 1
STEPS    ?= 1
OPS      ?= +-
N_TRAIN  ?= 2000
N_TEST   ?= 200
SFT_EPOCHS ?= 1
SFT_BATCH  ?= 16
SFT_LR     ?= 1e-4
ROUNDS   ?= 3
PROMPTS  ?= 32
G        ?= 8
GRPO_LR  ?= 1e-5
GRPO_BATCH ?= 64
GRPO_LOSS  ?= grpo_clip
GRPO_EPOCHS ?= 1
MAX_TOKENS ?= 64
TEMPLATE ?=

TASK   = $(BIN)/lm-task arith -d $(DIGITS) --steps $(STEPS) --ops '$(OPS)' $(if $(TEMPLATE),-t $(TEMPLATE))
SAMPLE = $(BIN)/lm-sample -t $(TOK) --jsonl --device $(DEVICE) --max-tokens $(MAX_TOKENS) --stop '</answer>'
EVAL   = BIN=$(BIN) TOK=$(TOK) DEVICE=$(DEVICE) MAX_TOKENS=$(MAX_TOKENS) \
	 $(dir $(lastword $(MAKEFILE_LIST)))align-eval.sh

.PHONY: all
all: $(OUT)/report.txt

$(OUT)/t0:
	mkdir -p $(OUT)
	date +%s > $@

$(OUT)/train.jsonl: | $(OUT)/t0
	$(TASK) -n $(N_TRAIN) -s 1 -r -o $@

$(OUT)/test.jsonl: | $(OUT)/t0
	$(TASK) -n $(N_TEST) -s 2 -o $@

$(OUT)/base.done: $(OUT)/test.jsonl
	$(EVAL) $(BASE) base $(OUT)
	touch $@

$(OUT)/sft.done: $(OUT)/train.jsonl $(OUT)/base.done
	$(BIN)/rl-update -a sft -t $(TOK) -c $(BASE) -o $(OUT)/sft -e $(SFT_EPOCHS) -b $(SFT_BATCH) \
		--lr $(SFT_LR) --device $(DEVICE) $(OUT)/train.jsonl > $(OUT)/sft-metrics.jsonl
	$(EVAL) $(OUT)/sft/latest sft $(OUT)
	touch $@

# Each round samples fresh prompts (seed 100 + round), so no test problem is
# trained on unless the generator repeats it by chance (few DIGITS).
$(OUT)/grpo.done: $(OUT)/sft.done
	mkdir -p $(OUT)/rounds
	ck=$(OUT)/sft/latest; i=1; while [ $$i -le $(ROUNDS) ]; do \
		$(TASK) -n $(PROMPTS) -s $$((100 + i)) | \
		$(SAMPLE) -c $$ck -n $(G) -s $$i > $(OUT)/rounds/$$i.rollouts.jsonl && \
		$(BIN)/rl-reward -o $(OUT)/rounds/$$i.scored.jsonl $(OUT)/rounds/$$i.rollouts.jsonl && \
		$(BIN)/rl-update -c $$ck -o $(OUT)/grpo -l $(GRPO_LOSS) -b $(GRPO_BATCH) \
			-e $(GRPO_EPOCHS) --lr $(GRPO_LR) --device $(DEVICE) $(OUT)/rounds/$$i.scored.jsonl \
			> $(OUT)/rounds/$$i.metrics.jsonl && \
		$(EVAL) $(OUT)/grpo/latest grpo-$$i $(OUT) || exit 1; \
		ck=$(OUT)/grpo/latest; i=$$((i + 1)); \
	done
	touch $@

$(OUT)/report.txt: $(OUT)/grpo.done
	{ echo "held-out accuracy on $(N_TEST) problems (DIGITS=$(DIGITS) STEPS=$(STEPS) OPS=$(OPS)):"; \
	  sed 's/^{"stage":"\([^"]*\)","accuracy":\([^,]*\),"format":\([^,]*\),"seconds":\([0-9]*\)}/  \1: accuracy \2, format \3, at \4 s/' \
		$(OUT)/log.jsonl; } > $@
	cat $@
