#!/usr/bin/python3
"""Golden Hugging Face model directories for algorithms/hf: dtypes, shards, side files.

Run with Debian's interpreter (torch 1.13), from the repository root, with the source of
huggingface_hub on hand (the sharding is its own split_state_dict_into_shards_factory, run as it is):

    git -C HUB_REPO archive HEAD src/huggingface_hub | tar -x -C /tmp/hfhub
    HF_HUB_SRC=/tmp/hfhub/src /usr/bin/python3 scripts/goldens/hf/make_goldens.py [OUT_DIR]

OUT_DIR defaults to algorithms/hf/testdata. The weights are those of the family reference directories
(algorithms/model/testdata/families, float32, made by scripts/goldens/families), converted by torch
(Tensor.to: round to nearest even) and written as transformers' save_pretrained writes them:

  - huggingface_hub/src/huggingface_hub/serialization/_base.py @ ee0a4510f4bc15e26cb722be2efc2bdb01383ca0
    split_state_dict_into_shards_factory (imported from HF_HUB_SRC and called, not copied), with the
    state dict in the order transformers registers the modules (embed_tokens; per layer self_attn
    q/k/v/o (+ q_norm, k_norm), mlp gate/up/down, the norms; norm; lm_head), tensor sizes
    numel * element_size, no shared storages (a tied lm_head is left out, as save_pretrained does);
  - transformers modeling_utils.save_pretrained: one file per shard written by safetensors' save_file
    with metadata {"format": "pt"}; when sharded, model.safetensors.index.json =
    json.dumps({"metadata": {"total_parameters": num_parameters(), **split.metadata},
    "weight_map": split.tensor_to_filename}, indent=2, sort_keys=True) + "\\n";
  - safetensors save_file (safetensors/src/tensor.rs @ 24b0b2857fef49be734b9ab72ce97c09bb25f5b9,
    prepare + Metadata serialize): tensors sorted by dtype then name (one dtype here: by name), the
    header {"__metadata__": ..., name: {"dtype", "shape", "data_offsets"}, ...} as compact JSON in
    that order, padded with spaces to a multiple of 8 bytes, little-endian data.

Cases (NAME/): llama-bf16 (untied, old config form, with generation_config.json listing two eos ids,
tokenizer_config.json and chat_template.jinja), gemma3-f16 (tied, new config form), qwen3-bf16-sharded
(untied, q/k norms and biases, max_shard_size "20KB"), llama-bf16-sharded (max_shard_size 4096 bytes,
where shards end exactly at the limit), llama-f16-sharded (4000 bytes: tensors bigger than a shard),
llama-f32 (the reference weights as they are)
with llama-f32/to-bf16.safetensors and to-f16.safetensors (torch's conversions of the same weights).
Each NAME/golden.json holds the first values of every tensor as torch reads them (float32), and the
max_shard_size used.
"""

import importlib.util
import json
import logging
import os
import shutil
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from safetensors_io import DTYPE_NAMES as NAMES, read_safetensors, save_file  # noqa: E402  (scripts/goldens/safetensors_io.py)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAMILIES = os.path.join(REPO, "algorithms", "model", "testdata", "families")

DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
CONFIG_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


def hub_splitter():
    """huggingface_hub's split_state_dict_into_shards_factory, loaded from its source file without the
    package's network dependencies (its only import is the package's logging helper)."""
    src = os.environ.get("HF_HUB_SRC")
    if not src:
        sys.exit("set HF_HUB_SRC to huggingface_hub's src directory (see the docstring)")
    pkg = types.ModuleType("huggingface_hub")
    pkg.__path__ = [os.path.join(src, "huggingface_hub")]
    log = types.ModuleType("huggingface_hub.logging")
    log.get_logger = logging.getLogger
    pkg.logging = log
    ser = types.ModuleType("huggingface_hub.serialization")
    ser.__path__ = [os.path.join(src, "huggingface_hub", "serialization")]
    sys.modules.update({"huggingface_hub": pkg, "huggingface_hub.logging": log,
                        "huggingface_hub.serialization": ser})
    path = os.path.join(src, "huggingface_hub", "serialization", "_base.py")
    spec = importlib.util.spec_from_file_location("huggingface_hub.serialization._base", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.split_state_dict_into_shards_factory


# The order of a decoder layer's tensors in transformers' state_dict (module registration order:
# LlamaAttention/Qwen3Attention/Gemma3Attention __init__ q_proj, k_proj, v_proj, o_proj[, q_norm,
# k_norm]; LlamaMLP gate_proj, up_proj, down_proj; the decoder layer's norms), weight before bias.
LAYER_ORDER = ["self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
               "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
               "self_attn.o_proj.weight", "self_attn.o_proj.bias", "self_attn.q_norm.weight",
               "self_attn.k_norm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
               "input_layernorm.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
               "post_feedforward_layernorm.weight"]


def state_dict_order(names, layers):
    out = ["model.embed_tokens.weight"]
    for i in range(layers):
        out += ["model.layers.%d.%s" % (i, n) for n in LAYER_ORDER if "model.layers.%d.%s" % (i, n) in names]
    out += ["model.norm.weight"]
    if "lm_head.weight" in names:
        out.append("lm_head.weight")
    assert sorted(out) == sorted(names), set(out) ^ set(names)
    return out


def storage_size(t):
    return t.numel() * t.element_size()


def make(out_dir, name, family, dtype, config_edits, side_files=None, max_shard_size=None):
    src = os.path.join(FAMILIES, family)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config.update(config_edits)
    for key in ("dtype", "torch_dtype"):
        if key in config:
            config[key] = CONFIG_NAMES[dtype]
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    state = {n: weights[n].to(dtype) for n in state_dict_order(list(weights), config["num_hidden_layers"])}
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:  # PretrainedConfig.to_json_string
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for fname, content in (side_files or {}).items():
        with open(os.path.join(d, fname), "w") as f:
            f.write(content)
    split = hub_splitter()(state, get_storage_size=storage_size, filename_pattern="model{suffix}.safetensors",
                           max_shard_size=max_shard_size or "5GB")
    for fname, tensors in split.filename_to_tensors.items():
        save_file({t: state[t] for t in tensors}, os.path.join(d, fname), metadata={"format": "pt"})
    if split.is_sharded:
        index = {"metadata": {"total_parameters": sum(t.numel() for t in state.values()), **split.metadata},
                 "weight_map": split.tensor_to_filename}
        with open(os.path.join(d, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    golden = {"max_shard_size": max_shard_size or "5GB", "dtype": NAMES[dtype],
              "first": {n: [float(x) for x in t.float().flatten()[:6]] for n, t in state.items()}}
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    return d, state


GENERATION = json.dumps({"bos_token_id": 1, "do_sample": True, "eos_token_id": [2, 3], "temperature": 0.6,
                         "top_p": 0.9, "transformers_version": "4.55.0"}, indent=2, sort_keys=True) + "\n"
TOKENIZER_CONFIG = json.dumps({"bos_token": "<s>", "eos_token": "</s>", "model_max_length": 64,
                               "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2) + "\n"
TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "algorithms", "hf", "testdata")
    torch.manual_seed(0)
    make(out_dir, "llama-bf16", "llama-old", torch.bfloat16,
         {"_name_or_path": "temper/llama-tiny", "pad_token_id": None},
         {"generation_config.json": GENERATION, "tokenizer_config.json": TOKENIZER_CONFIG,
          "chat_template.jinja": TEMPLATE})
    make(out_dir, "gemma3-f16", "gemma3-new", torch.float16, {"pad_token_id": 0})
    make(out_dir, "qwen3-bf16-sharded", "qwen3-new", torch.bfloat16, {}, max_shard_size="20KB")
    # 4096 bytes: the q, k and v of a layer fill a shard exactly (not over: no split), the embedding
    # alone fills one, gate, up and down each take their own.
    make(out_dir, "llama-bf16-sharded", "llama-old", torch.bfloat16, {}, max_shard_size=4096)
    # 4000 bytes in F16: the embedding and the (untied) lm_head are bigger than a shard and get one
    # each, lm_head's before the shard still open with the final norm.
    make(out_dir, "llama-f16-sharded", "llama-old", torch.float16, {}, max_shard_size=4000)
    d, state = make(out_dir, "llama-f32", "llama-old", torch.float32, {})
    for dt in (torch.bfloat16, torch.float16):
        save_file({n: t.to(dt) for n, t in state.items()}, os.path.join(d, "to-%s.safetensors" % NAMES[dt].lower()),
                  metadata={"format": "pt"})


if __name__ == "__main__":
    main()
