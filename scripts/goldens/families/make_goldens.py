#!/usr/bin/python3
"""Golden logits for Temper's decoder families, from a plain PyTorch re-implementation of transformers.

Run with Debian's interpreter (torch 1.13, numpy), from the repository root:

    /usr/bin/python3 scripts/goldens/families/make_goldens.py [OUT_DIR]

OUT_DIR defaults to algorithms/model/testdata/families. For every family (llama, gemma, qwen2, qwen3,
mistral, gemma2, gemma3_text, phi3) and both config.json forms ("old": torch_dtype, rope_theta,
rope_scaling as transformers < 4.56 writes them; "new": dtype and rope_parameters as transformers 5
writes them) it writes a small random-initialised Hugging Face directory NAME/ with config.json and
model.safetensors, plus NAME/golden.json: float32 logits at every position of three sequences longer
than the sliding window, and a greedy continuation of a prompt (with the smallest top-1/top-2 margin
seen, so that a tie cannot make the check flaky).

The model code below follows transformers' modeling files line by line (class and function names
kept), as read in these versions of huggingface/transformers (file @ commit):
    models/llama/modeling_llama.py, models/mistral/modeling_mistral.py, models/qwen2/modeling_qwen2.py
        (the Llama structure: RMSNorm, rotate_half, apply_rotary_pos_emb, repeat_kv,
        eager_attention_forward, the decoder layer; Qwen2: q/k/v biases, no o_proj bias)
    models/qwen3/modeling_qwen3.py (q_norm/k_norm on [.., head, head_dim] before RoPE)
    models/gemma2/modeling_gemma2.py @ 9a80143ca26066ee3266749a57c7b3850d8843be (4.49 era: four norms,
        query_pre_attn_scalar, attention and final soft-capping, sliding layers where layer_idx % 2 == 0)
    models/gemma2/configuration_gemma2.py @ 008e574391258935f3ecc3035c882e73bbcac419 (5.x: layer_types
        default "sliding_attention" if (i + 1) % 2 else "full_attention")
    models/gemma3/modeling_gemma3.py @ 0018aa647bb13801f061e2d1027c326f531b59fb (5.x: q_norm/k_norm
        Gemma3RMSNorm, per-layer-type rope_parameters, no attention soft-capping applied,
        final_logit_softcapping, embed_scale)
    models/gemma3/configuration_gemma3.py @ 008f5c8c29be84d4721dc6d1e0fcd72300580be4 (4.50 era:
        rope_local_base_freq, sliding_window_pattern, rope_scaling for the global layers)
    models/phi3/modeling_phi3.py @ 00d4b3d2142cb4ced2f51b90614b5d26bc045015 (fused qkv_proj and
        gate_up_proj, partial rotary, sliding_window on every layer when set)
    modeling_rope_utils.py @ 0044e3b3facff1a1ad60b235c69d5b45beae75a4 (default, linear, llama3 inverse
        frequencies, computed in float32 as there)
    masking_utils.py (5.x): causal_mask_function kv_idx <= q_idx; sliding_window_overlay
        kv_idx > q_idx - sliding_window; masked scores get torch.finfo(float32).min
The arithmetic of these families has not changed between those versions; only the config forms did.

model.safetensors is written as the safetensors library writes it (header keys sorted, metadata
{"format": "pt"}, header padded with spaces to 8 bytes, F32 little endian); a tied model has no
lm_head.weight, as save_pretrained leaves it out.
"""

import json
import math
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from safetensors_io import fmt, read_safetensors, save_file  # noqa: E402  (scripts/goldens/safetensors_io.py)

torch.set_grad_enabled(False)

VOCAB = 64
WINDOW = 5
SEQ_LENS = (19, 12, 7)
PROMPT_LEN = 9
NEW_TOKENS = 12

ACT2FN = {
    "silu": nn.functional.silu,
    "gelu_pytorch_tanh": lambda x: nn.functional.gelu(x, approximate="tanh"),
    "gelu": nn.functional.gelu,
}

# ---- configuration: defaults of transformers' configuration classes, both config.json forms ----

FAMILY_DEFAULTS = {
    "llama": dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, act="silu"),
    "gemma": dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, act="gelu_pytorch_tanh"),
    "qwen2": dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, act="silu"),
    "qwen3": dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, act="silu"),
    "mistral": dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, act="silu",
                    sliding_window=4096),
    "phi3": dict(rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, act="silu", sliding_window=None),
    "gemma2": dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, act="gelu_pytorch_tanh",
                   sliding_window=4096, query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0),
    "gemma3_text": dict(rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                        act="gelu_pytorch_tanh", sliding_window=4096, query_pre_attn_scalar=256,
                        attn_logit_softcapping=None, final_logit_softcapping=None, rope_local_base_freq=10000.0,
                        sliding_window_pattern=6),
}


def read_config(path):
    """Resolves config.json as transformers' config classes do (either form)."""
    with open(path) as f:
        raw = json.load(f)
    mt = raw["model_type"]
    d = FAMILY_DEFAULTS[mt]
    c = SimpleNamespace(model_type=mt)
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
        setattr(c, k, raw[k])
    c.num_key_value_heads = raw.get("num_key_value_heads") or c.num_attention_heads
    c.head_dim = raw.get("head_dim") or c.hidden_size // c.num_attention_heads
    c.rms_norm_eps = raw.get("rms_norm_eps", d["rms_norm_eps"])
    c.tie_word_embeddings = raw.get("tie_word_embeddings", d["tie_word_embeddings"])
    if mt in ("gemma", "gemma2", "gemma3_text"):
        c.hidden_activation = raw.get("hidden_activation") or d["act"]
    else:
        c.hidden_act = raw.get("hidden_act", d["act"])
    c.attention_bias = raw.get("attention_bias", False)
    c.partial_rotary_factor = raw.get("partial_rotary_factor", 1.0)
    c.query_pre_attn_scalar = raw.get("query_pre_attn_scalar", d.get("query_pre_attn_scalar"))
    c.attn_logit_softcapping = raw.get("attn_logit_softcapping", d.get("attn_logit_softcapping"))
    c.final_logit_softcapping = raw.get("final_logit_softcapping", d.get("final_logit_softcapping"))
    c.sliding_window = raw.get("sliding_window", d.get("sliding_window"))
    n = c.num_hidden_layers
    if mt == "gemma2":
        c.layer_types = raw.get("layer_types") or [
            "sliding_attention" if bool((i + 1) % 2) else "full_attention" for i in range(n)]
    elif mt == "gemma3_text":
        pattern = raw.get("sliding_window_pattern", d["sliding_window_pattern"])
        c.layer_types = raw.get("layer_types") or [
            "sliding_attention" if bool((i + 1) % pattern) else "full_attention" for i in range(n)]
    elif mt in ("mistral", "phi3") and c.sliding_window is not None:
        c.layer_types = ["sliding_attention"] * n
    else:
        c.layer_types = ["full_attention"] * n
    # RoPE (standardize_rope_params): {layer_type: {"rope_type", "rope_theta", scaling fields}}.
    if "rope_parameters" in raw:
        rp = raw["rope_parameters"]
        if mt == "gemma3_text":
            c.rope = {k: dict(rp[k]) for k in ("full_attention", "sliding_attention")}
        else:
            c.rope = {"full_attention": dict(rp), "sliding_attention": dict(rp)}
    else:
        scaling = dict(raw.get("rope_scaling") or {"rope_type": "default"})
        scaling.setdefault("rope_type", scaling.pop("type", "default"))
        glob = dict(scaling, rope_theta=raw.get("rope_theta", d["rope_theta"]))
        if mt == "gemma3_text":
            loc = {"rope_type": "default", "rope_theta": raw.get("rope_local_base_freq", d["rope_local_base_freq"])}
        else:
            loc = glob
        c.rope = {"full_attention": glob, "sliding_attention": loc}
    return c


# ---- modeling_rope_utils ----

def _compute_default_rope_parameters(config, rp):
    base = rp["rope_theta"]
    dim = int(config.head_dim * config.partial_rotary_factor)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    return inv_freq, 1.0


def _compute_linear_scaling_rope_parameters(config, rp):
    inv_freq, attention_factor = _compute_default_rope_parameters(config, rp)
    inv_freq /= rp["factor"]
    return inv_freq, attention_factor


def _compute_llama3_parameters(config, rp):
    inv_freq, attention_factor = _compute_default_rope_parameters(config, rp)
    factor = rp["factor"]
    low_freq_factor = rp["low_freq_factor"]
    high_freq_factor = rp["high_freq_factor"]
    old_context_len = rp["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    return inv_freq_llama, attention_factor


ROPE_INIT_FUNCTIONS = {"default": _compute_default_rope_parameters,
                       "linear": _compute_linear_scaling_rope_parameters,
                       "llama3": _compute_llama3_parameters}


class RotaryEmbedding(nn.Module):
    def __init__(self, config, layer_type):
        super().__init__()
        rp = config.rope[layer_type]
        self.inv_freq, self.attention_scaling = ROPE_INIT_FUNCTIONS[rp["rope_type"]](config, rp)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def apply_rotary_pos_emb_phi3(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, softcap=None):
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if softcap is not None:
        attn_weights = attn_weights / softcap
        attn_weights = torch.tanh(attn_weights)
        attn_weights = attn_weights * softcap
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


# ---- masking_utils ----

def make_mask(seq, sliding_window):
    q = torch.arange(seq)[:, None]
    kv = torch.arange(seq)[None, :]
    visible = kv <= q
    if sliding_window is not None:
        visible = visible & (kv > q - sliding_window)
    mask = torch.zeros(seq, seq, dtype=torch.float32)
    mask[~visible] = torch.finfo(torch.float32).min
    return mask[None, None]


# ---- norms ----

class LlamaRMSNorm(nn.Module):  # = Qwen2/Qwen3/Mistral/Phi3RMSNorm
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):  # = Gemma2RMSNorm, Gemma3RMSNorm
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


# ---- attention per family ----

class Attention(nn.Module):
    """LlamaAttention / MistralAttention / Qwen2Attention / Qwen3Attention / GemmaAttention /
    Gemma2Attention / Gemma3Attention / Phi3Attention: the forward below switches on the family
    only where their source differs."""

    def __init__(self, config, layer_idx):
        super().__init__()
        mt = config.model_type
        self.mt = mt
        self.config = config
        self.layer_type = config.layer_types[layer_idx]
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        h, nh, nkv, hd = config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim
        if mt in ("gemma2", "gemma3_text"):
            self.scaling = config.query_pre_attn_scalar ** -0.5
        else:
            self.scaling = hd ** -0.5
        if mt == "phi3":
            op_size = nh * hd + 2 * (nkv * hd)
            self.o_proj = nn.Linear(nh * hd, h, bias=False)
            self.qkv_proj = nn.Linear(h, op_size, bias=False)
        else:
            qkv_bias = True if mt == "qwen2" else (False if mt == "mistral" else config.attention_bias)
            o_bias = False if mt in ("qwen2", "mistral") else config.attention_bias
            self.q_proj = nn.Linear(h, nh * hd, bias=qkv_bias)
            self.k_proj = nn.Linear(h, nkv * hd, bias=qkv_bias)
            self.v_proj = nn.Linear(h, nkv * hd, bias=qkv_bias)
            self.o_proj = nn.Linear(nh * hd, h, bias=o_bias)
        if mt == "qwen3":
            self.q_norm = LlamaRMSNorm(hd, eps=config.rms_norm_eps)
            self.k_norm = LlamaRMSNorm(hd, eps=config.rms_norm_eps)
        if mt == "gemma3_text":
            self.q_norm = GemmaRMSNorm(dim=hd, eps=config.rms_norm_eps)
            self.k_norm = GemmaRMSNorm(dim=hd, eps=config.rms_norm_eps)
        # Gemma 2 passes attn_logit_softcapping to the attention function; Gemma 3 does not.
        self.softcap = config.attn_logit_softcapping if mt == "gemma2" else None

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        if self.mt == "phi3":
            qkv = self.qkv_proj(hidden_states)
            query_pos = self.config.num_attention_heads * self.head_dim
            nkv = self.config.num_key_value_heads * self.head_dim
            query_states = qkv[..., :query_pos].view(hidden_shape).transpose(1, 2)
            key_states = qkv[..., query_pos: query_pos + nkv].view(hidden_shape).transpose(1, 2)
            value_states = qkv[..., query_pos + nkv:].view(hidden_shape).transpose(1, 2)
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb_phi3(query_states, key_states, cos, sin)
        else:
            if self.mt == "qwen3":
                query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
                key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
            else:
                query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
                key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            if self.mt == "gemma3_text":
                query_states = self.q_norm(query_states)
                key_states = self.k_norm(key_states)
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_output = eager_attention_forward(self, query_states, key_states, value_states, attention_mask,
                                              scaling=self.scaling, softcap=self.softcap)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.phi3 = config.model_type == "phi3"
        h, i = config.hidden_size, config.intermediate_size
        if self.phi3:
            self.gate_up_proj = nn.Linear(h, 2 * i, bias=False)
        else:
            self.gate_proj = nn.Linear(h, i, bias=False)
            self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        act = getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", None)
        self.act_fn = ACT2FN[act]

    def forward(self, x):
        if self.phi3:  # Phi3MLP
            up_states = self.gate_up_proj(x)
            gate, up_states = up_states.chunk(2, dim=-1)
            up_states = up_states * self.act_fn(gate)
            return self.down_proj(up_states)
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.gemma_sandwich = config.model_type in ("gemma2", "gemma3_text")
        norm = GemmaRMSNorm if config.model_type.startswith("gemma") else LlamaRMSNorm
        h, eps = config.hidden_size, config.rms_norm_eps
        self.attention_type = config.layer_types[layer_idx]
        self.self_attn = Attention(config, layer_idx)
        self.mlp = MLP(config)
        self.input_layernorm = norm(h, eps)
        self.post_attention_layernorm = norm(h, eps)
        if self.gemma_sandwich:
            self.pre_feedforward_layernorm = norm(h, eps)
            self.post_feedforward_layernorm = norm(h, eps)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
        if self.gemma_sandwich:  # Gemma2DecoderLayer / Gemma3DecoderLayer
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.pre_feedforward_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            hidden_states = self.post_feedforward_layernorm(hidden_states)
            return residual + hidden_states
        hidden_states = residual + hidden_states  # LlamaDecoderLayer (Phi3: dropouts are identity in eval)
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class ForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        norm = GemmaRMSNorm if config.model_type.startswith("gemma") else LlamaRMSNorm
        self.norm = norm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = {t: RotaryEmbedding(config, t) for t in set(config.layer_types)}
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids):
        c = self.config
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = inputs_embeds
        if c.model_type in ("gemma", "gemma2"):
            normalizer = torch.tensor(c.hidden_size ** 0.5, dtype=hidden_states.dtype)
            hidden_states = hidden_states * normalizer
        elif c.model_type == "gemma3_text":  # Gemma3TextScaledWordEmbedding
            hidden_states = inputs_embeds * torch.tensor(c.hidden_size ** 0.5).to(self.embed_tokens.weight.dtype)
        seq = input_ids.shape[1]
        position_ids = torch.arange(seq)[None]
        masks = {"full_attention": make_mask(seq, None),
                 "sliding_attention": make_mask(seq, c.sliding_window)}
        pos = {t: e(hidden_states, position_ids) for t, e in self.rotary_emb.items()}
        for layer in self.layers:
            hidden_states = layer(hidden_states, pos[layer.attention_type], masks[layer.attention_type])
        hidden_states = self.norm(hidden_states)
        if self.lm_head is None:
            logits = hidden_states @ self.embed_tokens.weight.T
        else:
            logits = self.lm_head(hidden_states)
        if c.final_logit_softcapping is not None and c.model_type in ("gemma2", "gemma3_text"):
            logits = logits / c.final_logit_softcapping
            logits = torch.tanh(logits)
            logits = logits * c.final_logit_softcapping
        return logits


# ---- checkpoints ----

def hf_state(model):
    """Hugging Face tensor names → tensors, as save_pretrained writes them."""
    out = {"model.embed_tokens.weight": model.embed_tokens.weight, "model.norm.weight": model.norm.weight}
    if model.lm_head is not None:
        out["lm_head.weight"] = model.lm_head.weight
    for i, layer in enumerate(model.layers):
        for name, t in layer.named_parameters():
            out[f"model.layers.{i}.{name}"] = t
    return out


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    for name, t in sorted(hf_state(model).items()):
        n = torch.randn(t.shape, generator=g)
        if "norm" in name:
            gemma = model.config.model_type.startswith("gemma")
            t.copy_(0.3 * n if gemma else 1 + 0.3 * n)  # never all ones / zeros
        elif name.endswith(".bias"):
            t.copy_(0.3 * n)
        elif name == "model.embed_tokens.weight":
            t.copy_(n)
        else:
            t.copy_(n / math.sqrt(t.shape[-1]))


def load(model, path):
    state = read_safetensors(path)
    own = hf_state(model)
    assert set(state) == set(own), (set(state) ^ set(own))
    for k, t in own.items():
        t.copy_(state[k])


# ---- the family configs (small, GQA, sequences longer than the window) ----

def base(mt, **kw):
    c = {"architectures": [ARCH[mt]], "model_type": mt, "vocab_size": VOCAB, "hidden_size": 32,
         "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 64, "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02,
         "use_cache": True, "attention_dropout": 0.0}
    c.update(kw)
    return c


ARCH = {"llama": "LlamaForCausalLM", "gemma": "GemmaForCausalLM", "qwen2": "Qwen2ForCausalLM",
        "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM", "phi3": "Phi3ForCausalLM",
        "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM"}


def old_form(c, rope_theta=None, rope_scaling=None):
    c = dict(c, torch_dtype="float32", transformers_version="4.55.0")
    if rope_theta is not None:
        c["rope_theta"] = rope_theta
    c["rope_scaling"] = rope_scaling
    return c


def new_form(c, rope_parameters):
    return dict(c, dtype="float32", transformers_version="5.0.0", rope_parameters=rope_parameters)


LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}

CASES = {
    "llama-old": old_form(base("llama", head_dim=8, hidden_act="silu", attention_bias=False, mlp_bias=False,
                               rms_norm_eps=1e-5, tie_word_embeddings=False),
                          rope_theta=500000.0, rope_scaling=dict(LLAMA3, rope_type="llama3")),
    "llama-new": new_form(base("llama", head_dim=8, hidden_act="silu", attention_bias=True, mlp_bias=False,
                               rms_norm_eps=1e-5, tie_word_embeddings=True),
                          dict(LLAMA3, rope_type="llama3", rope_theta=500000.0)),
    "gemma-old": old_form(base("gemma", head_dim=16, num_key_value_heads=1, hidden_act="gelu",
                               hidden_activation="gelu_pytorch_tanh", pad_token_id=0), rope_theta=10000.0),
    "gemma-new": new_form(base("gemma", head_dim=12, hidden_activation="gelu_pytorch_tanh"),
                          {"rope_type": "default", "rope_theta": 10000.0}),
    "qwen2-old": old_form(base("qwen2", hidden_act="silu", tie_word_embeddings=True, use_sliding_window=False,
                               sliding_window=32, max_window_layers=3), rope_theta=1000000.0),
    "qwen2-new": new_form(base("qwen2", hidden_act="silu", tie_word_embeddings=False, use_sliding_window=False,
                               sliding_window=None, max_window_layers=3,
                               layer_types=["full_attention"] * 3),
                          {"rope_type": "default", "rope_theta": 1000000.0}),
    "qwen3-old": old_form(base("qwen3", head_dim=12, hidden_act="silu", attention_bias=False,
                               tie_word_embeddings=True, use_sliding_window=False, sliding_window=None,
                               max_window_layers=3), rope_theta=1000000.0),
    "qwen3-new": new_form(base("qwen3", head_dim=12, hidden_act="silu", attention_bias=True,
                               tie_word_embeddings=False, use_sliding_window=False, sliding_window=None,
                               max_window_layers=3, layer_types=["full_attention"] * 3),
                          {"rope_type": "default", "rope_theta": 1000000.0}),
    "mistral-old": old_form(base("mistral", head_dim=8, hidden_act="silu", sliding_window=WINDOW),
                            rope_theta=10000.0),
    "mistral-new": new_form(base("mistral", head_dim=12, hidden_act="silu", sliding_window=WINDOW + 1,
                                 tie_word_embeddings=True),
                            {"rope_type": "default", "rope_theta": 1000000.0}),
    "phi3-old": old_form(base("phi3", hidden_act="silu", head_dim=16, num_attention_heads=2,
                              num_key_value_heads=2, partial_rotary_factor=0.75, sliding_window=WINDOW,
                              resid_pdrop=0.0, embd_pdrop=0.0, original_max_position_embeddings=64,
                              rms_norm_eps=1e-5), rope_theta=10000.0),
    "phi3-new": new_form(base("phi3", hidden_act="silu", sliding_window=None, resid_pdrop=0.0, embd_pdrop=0.0,
                              tie_word_embeddings=False),
                         {"rope_type": "default", "rope_theta": 10000.0}),
    "gemma2-old": old_form(base("gemma2", head_dim=16, hidden_act="gelu_pytorch_tanh",
                                hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24,
                                sliding_window=WINDOW, attn_logit_softcapping=3.0, final_logit_softcapping=5.0,
                                cache_implementation="hybrid", pad_token_id=0), rope_theta=10000.0),
    "gemma2-new": new_form(base("gemma2", head_dim=8, hidden_activation="gelu_pytorch_tanh",
                                query_pre_attn_scalar=8, sliding_window=WINDOW + 1, attn_logit_softcapping=2.0,
                                final_logit_softcapping=None, attention_bias=True,
                                layer_types=["full_attention", "sliding_attention", "sliding_attention"]),
                           {"rope_type": "default", "rope_theta": 10000.0}),
    "gemma3-old": old_form(base("gemma3_text", head_dim=16, hidden_activation="gelu_pytorch_tanh",
                                query_pre_attn_scalar=16, sliding_window=WINDOW, sliding_window_pattern=3,
                                rope_local_base_freq=10000.0, attn_logit_softcapping=None,
                                final_logit_softcapping=None, cache_implementation="hybrid"),
                           rope_theta=1000000.0, rope_scaling={"rope_type": "linear", "factor": 8.0}),
    "gemma3-new": new_form(base("gemma3_text", head_dim=12, hidden_activation="gelu_pytorch_tanh",
                                query_pre_attn_scalar=20, sliding_window=WINDOW + 1, final_logit_softcapping=4.0,
                                attn_logit_softcapping=None,
                                layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
                           {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
}


def make(name, cfg_json, out_dir, seed):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
        f.write("\n")
    config = read_config(os.path.join(d, "config.json"))
    model = ForCausalLM(config).eval()
    randomize(model, seed)
    save_file(hf_state(model), os.path.join(d, "model.safetensors"))
    # Read back what was written, so the goldens come from the checkpoint itself.
    model = ForCausalLM(read_config(os.path.join(d, "config.json"))).eval()
    load(model, os.path.join(d, "model.safetensors"))
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(3, VOCAB, size=n).tolist() for n in SEQ_LENS]
    logits = []
    for s in seqs:
        out = model(torch.tensor([s], dtype=torch.int64))[0]
        logits.append([[fmt(v) for v in row] for row in out.tolist()])
    ids = list(seqs[0][:PROMPT_LEN])
    prompt = list(ids)
    margin = float("inf")
    for _ in range(NEW_TOKENS):
        last = model(torch.tensor([ids], dtype=torch.int64))[0, -1]
        top = torch.topk(last, 2).values
        margin = min(margin, float(top[0] - top[1]))
        ids.append(int(torch.argmax(last)))
    if margin < 1e-3:
        return False  # a near tie: the caller tries the next seed
    golden = {"name": name, "model_type": config.model_type, "sequences": seqs, "logits": logits,
              "prompt": prompt, "greedy": ids[len(prompt):], "greedy_min_margin": fmt(margin),
              "sliding_window": config.sliding_window if "sliding_attention" in config.layer_types else None,
              "layer_types": config.layer_types}
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"{name}: seed={seed} layer_types={config.layer_types} window={config.sliding_window} margin={margin:.3g}")
    return True


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "algorithms/model/testdata/families"
    for i, (name, cfg) in enumerate(sorted(CASES.items())):
        # Seeds are fixed; one whose greedy continuation has a near tie is skipped for the next.
        if not any(make(name, cfg, out_dir, seed=1000 + i + 100 * k) for k in range(10)):
            sys.exit(f"{name}: no seed gave a stable greedy continuation")


if __name__ == "__main__":
    main()
