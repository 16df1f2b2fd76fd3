# pipelines/pretrain.mk: text to a pretrained model, one file target per stage:
#
#   CORPUS --bpe-learn--> tok.bpe --bpe-encode | shard-pack--> data/ --lm-train--> ckpt/latest
#          --lm-sample--> samples.txt;  train.jsonl --plot-metrics.sh--> loss.png
#
# Re-running redoes only the stages whose inputs or parameters changed (each
# stage depends on a stamp of its command line, $(W)/.params/STAGE); make -j
# is safe.  The training stage never deletes checkpoints: interrupted (Ctrl-C
# saves one), it resumes; with a larger STEPS it extends the run; with other
# parameters it moves the old ckpt/ aside to ckpt.N and starts anew
# (pipelines/train-stage.sh).  Every parameter can be set on the command line:
#
#   make -f pipelines/pretrain.mk W=runs/ts CORPUS=TinyStories-train.txt VOCAB=10000 \
#        MODEL=ts STEPS=5000 BATCH=64 LR=1e-3 DEVICE=cuda
#   make -f pipelines/pretrain.mk W=runs/ts ... DEVICE=cuda GPUS=8 BATCH=16
#
# The default corpus is the fortune(6) database (Debian's "fortunes" package),
# one document per fortune.  A corpus whose documents are separated by
# SPECIAL (TinyStories, OpenWebText) is used as it is; one without SPECIAL
# (tinyshakespeare, a book) is cut into paragraphs (pipelines/paragraphs.sh).  The
# validation set is VAL_DOCS whole documents drawn with SEED (VAL_DOCS=0:
# none, and no evaluation).  A stage can be replaced by your own program by
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
# The samples stage (lm-sample) runs on DEVICE too unless SAMPLE_DEVICE
# says otherwise.
SAMPLE_DEVICE ?= $(DEVICE)
TRAIN_OPTS ?=
# Data parallel training (man 1 lm-train): GPUS=N starts N ranks on this host
# (lm-train --gpus N, which execs mpirun); LAUNCH is a command put before
# lm-train, e.g. LAUNCH='mpirun -np 2' or LAUNCH='srun --mpi=pmix' inside an
# allocation.  BATCH is per rank.
GPUS    ?=
LAUNCH  ?=
PROMPTS ?= 'A ' 'The ' 'Q: '
SAMPLE_OPTS ?= --max-tokens 60 --temperature 0.8 --top-p 0.95

LEARN  ?= $(BIN)/bpe-learn -v $(VOCAB) --special '$(SPECIAL)'
ENCODE ?= $(BIN)/bpe-encode -t $(W)/tok.bpe
PACK   ?= $(BIN)/shard-pack -f $(if $(filter 0,$(VAL_DOCS)),,--val-docs $(VAL_DOCS) --seed $(SEED))
VAL    ?= $(if $(filter 0,$(VAL_DOCS)),,--val $(W)/data/train-val --eval-every $(EVAL_EVERY))
PROGRESS ?= --progress
RECIPE = $(LAUNCH) $(BIN)/lm-train $(if $(GPUS),--gpus $(GPUS)) -m $(MODEL) $(MODEL_OPTS) -b $(BATCH) --lr $(LR) --warmup $(WARMUP) \
         -s $(SEED) -t $(W)/tok.bpe --device $(DEVICE) $(TRAIN_OPTS)
TRAIN  ?= $(RECIPE) -n $(STEPS) $(PROGRESS)
SAMPLE ?= $(BIN)/lm-sample $(SAMPLE_OPTS) -s $(SEED) --device $(SAMPLE_DEVICE)

# $(call stamp,NAME,TEXT) is the file $(W)/.params/NAME, rewritten (so that
# what depends on it is redone) only when its text is not TEXT.
same = $(and $(findstring $(1),$(2)),$(findstring $(2),$(1)))
stamp = $(W)/.params/$(1)$(if $(call same,$(file <$(W)/.params/$(1)),$(2)),,$(shell mkdir -p \
        $(W)/.params)$(file >$(W)/.params/$(1),$(2)))

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DELETE_ON_ERROR:
.PHONY: pretrain
pretrain: $(W)/samples.txt $(W)/loss.png

$(W)/corpus.txt:
	@mkdir -p $(@D)
	$(ROOT)/pipelines/fortunes2corpus.sh $(FORTUNES) > $@.tmp
	mv $@.tmp $@

$(W)/tok.bpe: $(CORPUS) $(call stamp,learn,$(LEARN) $(CORPUS))
	@mkdir -p $(@D)
	$(LEARN) -o $@ $(CORPUS)

# The shards are many files; a stamp stands for the set.
$(W)/data/.packed: $(W)/tok.bpe $(CORPUS) $(call stamp,pack,$(ENCODE) $(PACK) $(CORPUS))
	@mkdir -p $(@D)
	rm -f $(@D)/train-*.lms $(@D)/train.g*-*.lms $(@D)/train.manifest
	if grep -qF -- '$(SPECIAL)' $(CORPUS); then $(ENCODE) $(CORPUS); \
	else $(ROOT)/pipelines/paragraphs.sh $(CORPUS) '$(SPECIAL)' | $(ENCODE); fi | $(PACK) -o $(@D)/train
	$(BIN)/shard-pack -t $(@D)/train-*.lms
	touch $@

# ckpt/.done stands for a finished run (ckpt/latest exists mid-run too);
# .params/recipe is the training command without its length, which a run
# keeps when only STEPS changes.
$(W)/ckpt/.done: $(W)/data/.packed $(call stamp,train,$(TRAIN) $(VAL)) \
                 $(call stamp,recipe,$(RECIPE) $(VAL))
	rm -f $@
	$(ROOT)/pipelines/train-stage.sh $(@D) $(W)/train.jsonl $(W)/.params/recipe $(W)/data/.packed \
	    $(TRAIN) -d $(W)/data/train $(VAL) -o $(@D) --log $(W)/train.jsonl
	touch $@

$(W)/samples.txt: $(W)/ckpt/.done $(W)/tok.bpe $(call stamp,sample,$(SAMPLE) $(PROMPTS))
	$(SAMPLE) -c $(W)/ckpt/latest -t $(W)/tok.bpe $(PROMPTS) > $@.tmp
	mv $@.tmp $@

$(W)/loss.png: $(W)/ckpt/.done
	$(ROOT)/pipelines/plot-metrics.sh loss $(W)/train.jsonl $@
