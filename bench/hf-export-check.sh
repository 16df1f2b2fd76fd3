#!/bin/sh
# bench/hf-export-check.sh: every model variant that a Hugging Face class
# expresses, exported by lm-train and loaded by transformers (fp32), against
# lm-train's own logits (bench/hf_crosscheck.py; max abs diff < 1e-4): the
# Llama family (untied, tied, GQA, MQA, GQA tied, another norm epsilon, the
# z-loss, which only trains) as LlamaForCausalLM, QK-norm (with GQA, and
# tied) as Qwen3ForCausalLM, and a model read from a Qwen3 config.json.
# Each is a tiny model trained 5 steps with --device cpu.  The variants no
# class expresses (ReLU^2, soft-capping) must be refused by name with exit
# 2.  One JSON line per variant; exits 1 if any fails.
#
# Uses the programs already built in bin/ (LMPIPE_BIN), so it runs where
# lmpipe cannot be built (the GPU machine has no jansson headers).  Needs
# python3 with torch, transformers (5.x) and safetensors.
set -eu
ROOT=${LMPIPE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${LMPIPE_BIN:-$ROOT/bin}
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hf-export.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
for p in lm-train shard-pack; do
	[ -x "$BIN/$p" ] || { echo "hf-export-check: $BIN/$p is not built (make, or set LMPIPE_BIN)" >&2; exit 2; }
done
perl "$ROOT/tests/mktext.pl" 4000 5 | perl "$ROOT/tests/bytes2tok.pl" > "$TMP/t.tok"
"$BIN/shard-pack" -o "$TMP/d" < "$TMP/t.tok"
T=64
perl -e 'srand(7); for (1 .. 3) { print join(" ", map { int(rand(256)) } 1 .. $ARGV[0]), "\n" }' "$T" > "$TMP/ids.txt"
S="-m tiny --vocab 256 --context $T --d-model 64 --heads 4 --d-ff 172"
fail=0

train() { # train NAME LM-TRAIN-OPTION...
	name=$1; shift
	"$BIN/lm-train" "$@" -b 4 -n 5 --lr 1e-2 --device cpu -d "$TMP/d" -o "$TMP/$name" 2> "$TMP/$name.err"
}

# check NAME CLASS LM-TRAIN-OPTION...: exports as CLASS, logits match.
check() {
	name=$1 class=$2; shift 2
	if ! train "$name" "$@" ||
	   ! "$BIN/lm-train" -c "$TMP/$name/latest" --export-hf "$TMP/$name.hf" 2>> "$TMP/$name.err" ||
	   ! "$BIN/lm-train" -c "$TMP/$name/latest" --ids "$TMP/ids.txt" --dump-logits "$TMP/$name.logits" 2>> "$TMP/$name.err"; then
		printf '{"check":"hf-export","variant":"%s","ok":false,"error":"%s"}\n' "$name" "$(tr '"\n' "' " < "$TMP/$name.err")"
		fail=1
		return
	fi
	line=$("$PYTHON" "$ROOT/bench/hf_crosscheck.py" "$TMP/$name.hf" "$TMP/$name.logits") || fail=1
	case $line in *"\"class\": \"$class\""*) ;; *) fail=1 ;; esac
	printf '{"check":"hf-export","variant":"%s","want_class":"%s","result":%s}\n' "$name" "$class" "$line"
}

# refused NAME WORD LM-TRAIN-OPTION...: the export exits 2 naming WORD.
refused() {
	name=$1 word=$2; shift 2
	ok=false
	if train "$name" "$@"; then
		rc=0
		"$BIN/lm-train" -c "$TMP/$name/latest" --export-hf "$TMP/$name.hf" 2> "$TMP/$name.err" || rc=$?
		[ "$rc" = 2 ] && grep -q "$word" "$TMP/$name.err" && [ ! -e "$TMP/$name.hf" ] && ok=true
	fi
	[ "$ok" = true ] || fail=1
	printf '{"check":"hf-export-refused","variant":"%s","ok":%s,"message":"%s"}\n' "$name" "$ok" \
		"$(tr '"\n' "' " < "$TMP/$name.err")"
}

check llama LlamaForCausalLM $S
check llama-tied LlamaForCausalLM $S --tie-embeddings --rope-theta 500
check gqa LlamaForCausalLM $S --kv-heads 2
check mqa LlamaForCausalLM $S --kv-heads 1
check gqa-tied LlamaForCausalLM $S --kv-heads 2 --tie-embeddings
check norm-eps LlamaForCausalLM $S --norm-eps 1e-6
check z-loss LlamaForCausalLM $S --z-loss 1e-3
check qwen3 Qwen3ForCausalLM $S --qk-norm
check qwen3-gqa-tied Qwen3ForCausalLM $S --qk-norm --kv-heads 2 --tie-embeddings --norm-eps 1e-6
cat > "$TMP/qwen3-config.json" <<JSON
{ "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 256,
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 8,
  "max_position_embeddings": $T, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "hidden_act": "silu", "attention_bias": false,
  "use_sliding_window": false }
JSON
check qwen3-from-config Qwen3ForCausalLM --config "$TMP/qwen3-config.json"
refused relu2 relu2 $S --mlp relu2
refused softcap logit_softcap $S --softcap 30
exit $fail
