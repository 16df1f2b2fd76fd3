#!/bin/sh
# tests/lm-train-variants.t: the model variants through lm-train (issue 17):
# each variant (GQA, MQA, QK-norm, ReLU^2, soft-capping, z-loss, norm
# epsilon, all at once from a --config file, and some under Muon) trains,
# is recorded in its checkpoint (--info) and resumes bit for bit (6 steps
# against 3 + resume + 3 of the same run); --config takes the presets' own JSON and a Hugging
# Face config.json; the export writes LlamaForCausalLM (GQA, tied) or
# Qwen3ForCausalLM (QK-norm) and refuses ReLU^2 and soft-capping by name.
# Byte-level shards of a generated text, the tiny model, one thread.
. "$(dirname "$0")/lib.sh"

cd "$TMP"
perl "$LMPIPE_ROOT/tests/mktext.pl" 400 1 > text.txt
perl "$LMPIPE_ROOT/tests/bytes2tok.pl" < text.txt > text.tok
shard-pack -o d < text.tok
ok $? "byte-level shards"
M="-m tiny --vocab 256 --context 32 -b 4 -j 1"

# A JSON value of a file: json FILE KEY [KEY...] (nested keys).
json() {
	perl -MJSON::PP -e 'local $/; open my $f, "<", shift or die; my $j = decode_json(<$f>);
		$j = ref $j eq "ARRAY" ? $j->[$_] : $j->{$_} for @ARGV; print ref $j eq "JSON::PP::Boolean" ? ($j ? "true" : "false") : $j' "$@"
}

# resumes NAME OPTIONS...: 6 steps in one run, and 3 of them resumed for
# the other 3, end in the same bytes.
resumes() {
	name=$1; shift
	run lm-train "$@" -d d -n 6 --ckpt-every 3 -o "$name-full"
	is "$rc" 0 "$name: trains ($err)"
	mkdir -p "$name-half"
	cp "$name-full/step-00000003.safetensors" "$name-half/"
	ln -s step-00000003.safetensors "$name-half/latest"
	run lm-train -d d -o "$name-half" --resume -j 1
	is "$rc" 0 "$name: resumes from step 3 ($err)"
	cmp -s "$name-full/step-00000006.safetensors" "$name-half/step-00000006.safetensors"
	ok $? "$name: 3 steps + resume + 3 equal 6 steps bit for bit"
}

resumes gqa $M --kv-heads 2
resumes mqa $M --kv-heads 1
resumes qknorm $M --qk-norm
resumes relu2 $M --mlp relu2
resumes softcap $M --softcap 5
resumes zloss $M --z-loss 1e-3
resumes eps $M --norm-eps 1e-6
# Muon's groups take the variants' shapes: GQA's narrower k/v matrices, the
# QK-norm gains (1-D: AdamW), ReLU^2's single up projection
resumes muon $M --kv-heads 2 --qk-norm --mlp relu2 --optimizer muon

run lm-train -c gqa-full/latest --info
printf '%s\n' "$out" | grep -q '^variants *kv_heads 2, qk_norm 0, mlp swiglu, softcap 0, z_loss 0, norm_eps 1e-05$'
ok $? "--info shows the variants ($(printf '%s\n' "$out" | grep '^variants'))"
printf '%s\n' "$out" | sed -n 's/^config *//p' > gqa.json
is "$(json gqa.json num_kv_heads)" 2 "--info prints the checkpoint's model as a config"

# Every variant at once from a config file; the command line overrides it.
cat > all.json <<'JSON'
{ "vocab_size": 256, "context_length": 32, "d_model": 32, "num_layers": 2,
  "num_heads": 4, "num_kv_heads": 2, "d_ff": 48, "tie_embeddings": true,
  "qk_norm": true, "mlp": "relu2", "logit_softcap": 8, "z_loss": 1e-4, "norm_eps": 1e-6 }
JSON
resumes all --config all.json --d-ff 40 -b 4 -j 1
run lm-train -c all-full/latest --info
printf '%s\n' "$out" | sed -n 's/^config *//p' > all-out.json
is "$(json all-out.json d_ff)/$(json all-out.json mlp)/$(json all-out.json logit_softcap)/$(json all-out.json qk_norm)" \
	"40/relu2/8/true" "--config with --d-ff: the option overrides the file's field"

# The presets are configs: a line of --list-models, its "config", trains.
lm-train --list-models | perl -MJSON::PP -ne 'my $j = decode_json($_);
	print encode_json($j->{config}) if $j->{name} eq "tiny"' > tiny.json
run lm-train --config tiny.json --vocab 256 --context 32 -b 4 -j 1 -d d -n 1
is "$rc" 0 "a preset's config from --list-models trains ($err)"
run lm-train -m tiny --config tiny.json -d d -n 1
is "$rc" 2 "-m and --config together: exit 2"
is "$err" "lm-train: give -m NAME or --config FILE, not both" "-m and --config together: the message"

# A Hugging Face config.json: Qwen3 is QK-norm, with its GQA and tying.
cat > hf.json <<'JSON'
{ "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 256,
  "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 8,
  "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "hidden_act": "silu", "attention_bias": false,
  "rope_scaling": null, "use_sliding_window": false, "torch_dtype": "bfloat16" }
JSON
run lm-train --config hf.json -b 4 -j 1 -d d -n 1 -o hf
is "$rc" 0 "a Qwen3 config.json trains ($err)"
run lm-train -c hf/latest --info
printf '%s\n' "$out" | sed -n 's/^config *//p' > hf-out.json
is "$(json hf-out.json num_kv_heads)/$(json hf-out.json qk_norm)/$(json hf-out.json rope_theta)/$(json hf-out.json tie_embeddings)/$(json hf-out.json norm_eps)" \
	"1/true/1000000/true/1e-06" "the Qwen3 config's fields are the model's"

# Export: Llama for GQA, Qwen3 for QK-norm, refusals by name.
run lm-train -c gqa-full/latest --export-hf gqa-hf
is "$rc" 0 "GQA exports ($err)"
is "$(json gqa-hf/config.json architectures 0)/$(json gqa-hf/config.json num_key_value_heads)" \
	"LlamaForCausalLM/2" "GQA: LlamaForCausalLM with 2 key/value heads"
run lm-train -c hf/latest --export-hf hf-hf
is "$(json hf-hf/config.json architectures 0)/$(json hf-hf/config.json model_type)/$(json hf-hf/config.json head_dim)/$(json hf-hf/config.json tie_word_embeddings)" \
	"Qwen3ForCausalLM/qwen3/8/true" "QK-norm: Qwen3ForCausalLM ($err)"
run lm-train -c relu2-full/latest --export-hf relu2-hf
is "$rc" 2 "ReLU^2 does not export: exit 2"
is "$err" "lm-train: the variant mlp=relu2 (the squared-ReLU MLP) has no Hugging Face class: only SwiGLU models export" "ReLU^2: the message names it"
[ ! -e relu2-hf ]; ok $? "ReLU^2: nothing written"
run lm-train -c softcap-full/latest --export-hf softcap-hf
is "$rc" 2 "soft-capping does not export: exit 2"
is "$err" "lm-train: the variant logit_softcap=5 has no Hugging Face class (LlamaForCausalLM and Qwen3ForCausalLM do not cap logits)" "soft-capping: the message names it"
run lm-train -c zloss-full/latest --export-hf zloss-hf
is "$rc/$(json zloss-hf/config.json architectures 0)" "0/LlamaForCausalLM" "the z-loss only trains: it exports as Llama"

# A checkpoint of a variant is version 2; the plain model stays version 1.
perl -e 'open my $f, "<", shift; read $f, my $n, 8; read $f, my $h, unpack("Q<", $n);
	print $h =~ /"lmpipe.version":"(\d+)"/ ? $1 : "?"' gqa-full/latest > v.txt
is "$(cat v.txt)" 2 "a variant's checkpoint is version 2"
run lm-train $M -d d -n 1 -o plain
perl -e 'open my $f, "<", shift; read $f, my $n, 8; read $f, my $h, unpack("Q<", $n);
	print $h =~ /"lmpipe.version":"(\d+)"/ ? $1 : "?"' plain/latest > v.txt
is "$(cat v.txt)" 1 "the plain model's checkpoint is still version 1"

done_testing
