# pipelines/pretrain.mk: text to a pretrained model, one file target per stage:
#
#   CORPUS --bpe-learn--> tok.bpe --bpe-encode | shard-pack--> data/ --lm-train--> ckpt/latest
#          --lm-sample--> samples.txt;  train.jsonl --plot-metrics.sh--> loss.png
#
# Re-running redoes only the stages whose inputs changed; make -j is safe.
# Every parameter can be set on the command line:
#
#   make -f pipelines/pretrain.mk W=runs/ts CORPUS=TinyStories-train.txt VOCAB=10000 \
#        MODEL=ts STEPS=5000 BATCH=64 LR=1e-3 DEVICE=cuda
#
# The default corpus is the fortune(6) database (Debian's "fortunes" package),
# one document per fortune.  A stage can be replaced by your own program by
# overriding its command (LEARN, ENCODE, PACK, TRAIN, SAMPLE): it must read and
# write the same files (man 5 lmpipe-tokenizer, lmpipe-tokens, lmpipe-shard,
# lmpipe-checkpoint), e.g. ENCODE='my-encoder --tok $(W)/tok.bpe'.

ROOT    := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BIN     ?= $(ROOT)/bin
W       ?= work
CORPUS  ?= $(W)/corpus.txt
FORTUNES ?= /usr/share/games/fortunes
SPECIAL ?= <|endoftext|>
VOCAB   ?= 1024
VAL_DOCS ?= 300
SEED    ?= 1
MODEL   ?= tiny
CONTEXT ?= 128
MODEL_OPTS ?= --vocab $(VOCAB) --context $(CONTEXT) --d-model 128 --layers 2 --heads 4 --d-ff 352
STEPS   ?= 400
BATCH   ?= 16
LR      ?= 3e-3
WARMUP  ?= 20
EVAL_EVERY ?= 50
DEVICE  ?= cpu
TRAIN_OPTS ?=
PROMPTS ?= 'A ' 'The ' 'Q: '
SAMPLE_OPTS ?= --max-tokens 60 --temperature 0.8 --top-p 0.95

LEARN  ?= $(BIN)/bpe-learn -v $(VOCAB) --special '$(SPECIAL)'
ENCODE ?= $(BIN)/bpe-encode -t $(W)/tok.bpe
PACK   ?= $(BIN)/shard-pack -f --val-docs $(VAL_DOCS) --seed $(SEED)
TRAIN  ?= $(BIN)/lm-train -m $(MODEL) $(MODEL_OPTS) -b $(BATCH) -n $(STEPS) --lr $(LR) \
          --warmup $(WARMUP) --eval-every $(EVAL_EVERY) -s $(SEED) --device $(DEVICE) $(TRAIN_OPTS)
SAMPLE ?= $(BIN)/lm-sample $(SAMPLE_OPTS) -s $(SEED) --device $(DEVICE)

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DELETE_ON_ERROR:
.PHONY: pretrain
pretrain: $(W)/samples.txt $(W)/loss.png

$(W)/corpus.txt:
	@mkdir -p $(@D)
	$(ROOT)/pipelines/fortunes2corpus.sh $(FORTUNES) > $@.tmp
	mv $@.tmp $@

$(W)/tok.bpe: $(CORPUS)
	@mkdir -p $(@D)
	$(LEARN) -o $@ $(CORPUS)

# The shards are many files; a stamp stands for the set.
$(W)/data/.packed: $(W)/tok.bpe $(CORPUS)
	@mkdir -p $(@D)
	rm -f $(@D)/train-*.lms $(@D)/train.g*-*.lms $(@D)/train.manifest
	$(ENCODE) $(CORPUS) | $(PACK) -o $(@D)/train
	$(BIN)/shard-pack -t $(@D)/train-*.lms
	touch $@

$(W)/ckpt/latest: $(W)/data/.packed
	rm -rf $(@D)
	$(TRAIN) -d $(W)/data/train --val $(W)/data/train-val -o $(@D) --log $(W)/train.jsonl

$(W)/samples.txt: $(W)/ckpt/latest $(W)/tok.bpe
	$(SAMPLE) -c $(W)/ckpt/latest -t $(W)/tok.bpe $(PROMPTS) > $@.tmp
	mv $@.tmp $@

$(W)/loss.png: $(W)/ckpt/latest
	$(ROOT)/pipelines/plot-metrics.sh loss $(W)/train.jsonl $@
