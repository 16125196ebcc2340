#!/usr/bin/python3
"""Golden data for Temper's SigLIP vision tower (algorithms/vision) and image preprocessing (algorithms/imageproc).

Run with Debian's interpreter (torch 1.13, numpy, Pillow 9.4 from python3-pil), from the repository root:

    /usr/bin/python3 scripts/goldens/vision/make_goldens.py

It is deterministic and writes:

  algorithms/imageproc/testdata/images/      small source images (PNG in modes RGB, RGBA, L, LA, P with
                                             transparency; one JPEG), drawn from a fixed seed
  algorithms/imageproc/testdata/processed/   for each (image, size, resampling filter) case the resized RGB
                                             image as PIL produces it (lossless PNG), and golden.json: per
                                             case the SHA-256 of the float32 pixel_values (channels first,
                                             little endian) and their first values
  algorithms/imageproc/testdata/preprocessor_config.json   google/siglip-base-patch16-224's processor config
  algorithms/vision/testdata/<name>/         a random-initialised Hugging Face directory (config.json,
                                             model.safetensors, preprocessor_config.json) and golden.json:
                                             the pixel_values fed to the tower and its float32 outputs
                                             last_hidden_state [batch, patches, d] and pooler_output [batch, d]

The preprocessing follows transformers' SiglipImageProcessor.preprocess (the slow, PIL-based processor) and the
functions of image_transforms.py it calls: convert_to_rgb (PIL convert("RGB"): alpha is dropped, not composited),
to_numpy_array, resize (uint8 array → PIL image → Image.resize(size, resample) → uint8 array), rescale (float64
multiply, then float32), normalize (float32 (x - mean) / std), to_channel_dimension_format(FIRST). Read in
huggingface/transformers:
    models/siglip/image_processing_siglip.py @ 15ea02a2add1672acbeee158a9448720d6093de1
    image_transforms.py (rescale, normalize, resize, to_pil_image, convert_to_rgb; unchanged in 4.4x-5.x)
do_convert_rgb is applied always (Temper converts every image to RGB before resizing; on RGB input it is a no-op).

The model code follows models/siglip/modeling_siglip.py @ 00b206564aa29563b46bfce0511de4a4f1eefc8c line by line
(class names kept): SiglipVisionEmbeddings (Conv2d patch embedding, learned position embeddings, no interpolation),
SiglipAttention (eager: softmax in float32, scale head_dim**-0.5), SiglipMLP, SiglipEncoderLayer (pre-norm),
SiglipEncoder, SiglipVisionTransformer (post_layernorm; the head only when vision_use_head, default True),
SiglipMultiheadAttentionPoolingHead (probe + torch.nn.MultiheadAttention + layernorm + MLP, output [:, 0]).
The configuration defaults are configuration_siglip.py @ d5ab4d58c4e44f1a6463fd4037fcdefb355ea468 (patch_size 16,
gelu_pytorch_tanh, layer_norm_eps 1e-6). The arithmetic of these classes is the same in transformers 4.37-5.x
(later versions route attention through eager_attention_forward with the same softmax in float32).

model.safetensors is written as the safetensors library writes it (F32, header keys sorted, metadata
{"format": "pt"}, header padded with spaces to 8 bytes).
"""

import hashlib
import io
import json
import math
import os
import sys

import numpy as np
import torch
from PIL import Image, ImageDraw
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from safetensors_io import fmt, read_safetensors, save_file  # noqa: E402  (scripts/goldens/safetensors_io.py)

torch.set_grad_enabled(False)

IMAGEPROC = "algorithms/imageproc/testdata"
VISION = "algorithms/vision/testdata"

# google/siglip-base-patch16-224's preprocessor_config.json.
SIGLIP_PROCESSOR = {
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "SiglipImageProcessor",
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "SiglipProcessor",
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 224, "width": 224},
}

FILTERS = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}


# ---- source images ----

def smooth_rgb(rng, w, h, noise=6.0):
    """A smooth colour field with edges and a little noise: compressible, but every filter tap matters."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / max(w, 1) * 5.1 + 0.3) * np.cos(y / max(h, 1) * 3.7)
    g = 60 + 190 * (x + y) / (w + h)
    b = 200 - 150 * ((x - w / 3) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2)
    a = np.stack([r, g, b], -1) + rng.normal(0, noise, (h, w, 3))
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


def draw_shapes(im, rng):
    d = ImageDraw.Draw(im)
    w, h = im.size
    for _ in range(4):
        x0, y0 = int(rng.integers(0, w - 2)), int(rng.integers(0, h - 2))
        x1, y1 = int(rng.integers(x0 + 1, w)), int(rng.integers(y0 + 1, h))
        fill = tuple(int(v) for v in rng.integers(0, 256, len(im.getbands())))
        d.rectangle([x0, y0, x1, y1], fill=fill if len(fill) > 1 else fill[0])
    return im


def make_images(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(43)
    images = {}

    im = draw_shapes(Image.fromarray(smooth_rgb(rng, 37, 29)), rng)
    images["rgb-37x29.png"] = im
    im = draw_shapes(Image.fromarray(smooth_rgb(rng, 300, 200, noise=3)), rng)
    images["rgb-300x200.png"] = im
    im = Image.fromarray(smooth_rgb(rng, 224, 224, noise=2))
    images["rgb-224x224.png"] = im

    rgb = smooth_rgb(rng, 64, 48)
    alpha = np.clip(np.rint(np.linspace(0, 255, 64)[None, :] + rng.normal(0, 20, (48, 64))), 0, 255).astype(np.uint8)
    images["rgba-64x48.png"] = Image.fromarray(np.concatenate([rgb, alpha[..., None]], -1), "RGBA")

    gray = smooth_rgb(rng, 50, 70)[..., 1]
    images["gray-50x70.png"] = draw_shapes(Image.fromarray(gray, "L"), rng)

    la = np.stack([smooth_rgb(rng, 30, 20)[..., 0], rng.integers(0, 256, (20, 30)).astype(np.uint8)], -1)
    images["gray-alpha-30x20.png"] = Image.fromarray(la, "LA")

    p = Image.fromarray(smooth_rgb(rng, 40, 40, noise=20)).quantize(colors=16, method=Image.Quantize.MEDIANCUT)
    p.info["transparency"] = 3  # one palette entry transparent: convert("RGB") must ignore it
    images["palette-40x40.png"] = p

    for name, im in images.items():
        kw = {"transparency": im.info["transparency"]} if "transparency" in im.info else {}
        im.save(os.path.join(out, name), optimize=False, **kw)

    # JPEG: 4:2:0, 4:2:2 and 4:4:4 chroma (odd sizes for the edge columns and rows), and grayscale.
    jpg = draw_shapes(Image.fromarray(smooth_rgb(rng, 96, 80, noise=4)), rng)
    jpg.save(os.path.join(out, "photo-96x80.jpg"), quality=90, subsampling=2)
    jpg = draw_shapes(Image.fromarray(smooth_rgb(rng, 45, 37, noise=4)), rng)
    jpg.save(os.path.join(out, "photo422-45x37.jpg"), quality=85, subsampling=1)
    jpg = draw_shapes(Image.fromarray(smooth_rgb(rng, 33, 21, noise=4)), rng)
    jpg.save(os.path.join(out, "photo444-33x21.jpg"), quality=95, subsampling=0)
    jpg = draw_shapes(Image.fromarray(smooth_rgb(rng, 20, 30)[..., 0], "L"), rng)
    jpg.save(os.path.join(out, "gray-20x30.jpg"), quality=90)
    return sorted(os.listdir(out))


# ---- SiglipImageProcessor (slow) ----

def convert_to_rgb(image):
    if image.mode == "RGB":
        return image
    return image.convert("RGB")


def resize(image, size, resample):
    # image_transforms.resize on a uint8 array: to_pil_image (no rescale for uint8), PIL resize, back to numpy.
    height, width = size
    pil = Image.fromarray(image)
    resized = pil.resize((width, height), resample=resample, reducing_gap=None)
    return np.array(resized)


def rescale(image, scale):
    return (image.astype(np.float64) * scale).astype(np.float32)


def normalize(image, mean, std):
    if not np.issubdtype(image.dtype, np.floating):
        image = image.astype(np.float32)
    mean = np.array(mean, dtype=image.dtype)
    std = np.array(std, dtype=image.dtype)
    return (image - mean) / std  # channels last


def preprocess(path, cfg):
    """SiglipImageProcessor.preprocess for one image file: (resized uint8 HWC, pixel_values float32 CHW)."""
    image = Image.open(path)
    image = convert_to_rgb(image)
    image = np.array(image)
    if cfg["do_resize"]:
        image = resize(image, (cfg["size"]["height"], cfg["size"]["width"]), cfg["resample"])
    resized = image
    if cfg["do_rescale"]:
        image = rescale(image, cfg["rescale_factor"])
    if cfg["do_normalize"]:
        image = normalize(image, cfg["image_mean"], cfg["image_std"])
    return resized, np.ascontiguousarray(image.transpose(2, 0, 1)).astype(np.float32)


def make_processed(images, out):
    os.makedirs(out, exist_ok=True)
    cases = []
    for img in images:
        for size in ((224, 224), (32, 32), (24, 24)):
            cases.append((img, size, "bicubic"))
    for img in images:
        if img.endswith(".jpg"):  # the decoded image itself (same size: no resampling)
            w, h = Image.open(os.path.join(IMAGEPROC, "images", img)).size
            cases.append((img, (h, w), "bicubic"))
    for img in ("rgb-300x200.png", "rgb-37x29.png", "photo-96x80.jpg"):
        for filt in ("bilinear", "lanczos", "box", "hamming"):
            cases.append((img, (24, 40), filt))
        cases.append((img, (61, 50), "bicubic"))
    golden = []
    for img, (h, w), filt in cases:
        cfg = dict(SIGLIP_PROCESSOR, size={"height": h, "width": w}, resample=FILTERS[filt])
        resized, pv = preprocess(os.path.join(IMAGEPROC, "images", img), cfg)
        stem = os.path.splitext(img)[0]
        name = f"{stem}.{filt}-{w}x{h}.png"
        Image.fromarray(resized, "RGB").save(os.path.join(out, name), optimize=False)
        golden.append({"image": img, "width": w, "height": h, "resample": FILTERS[filt], "filter": filt,
                       "resized": name, "pixel_values_sha256": hashlib.sha256(pv.astype("<f4").tobytes()).hexdigest(),
                       "pixel_values_head": [fmt(v) for v in pv.reshape(-1)[:6]]})
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump({"processor": SIGLIP_PROCESSOR, "cases": golden}, f, indent=1)
        f.write("\n")
    print(f"processed: {len(golden)} cases")


# ---- modeling_siglip.py (vision tower) ----

class Config:
    def __init__(self, d):
        self.hidden_size = d.get("hidden_size", 768)
        self.intermediate_size = d.get("intermediate_size", 3072)
        self.num_hidden_layers = d.get("num_hidden_layers", 12)
        self.num_attention_heads = d.get("num_attention_heads", 12)
        self.num_channels = d.get("num_channels", 3)
        self.image_size = d.get("image_size", 224)
        self.patch_size = d.get("patch_size", 16)
        self.hidden_act = d.get("hidden_act", "gelu_pytorch_tanh")
        self.layer_norm_eps = d.get("layer_norm_eps", 1e-6)
        self.attention_dropout = d.get("attention_dropout", 0.0)
        if "vision_use_head" in d:
            self.vision_use_head = d["vision_use_head"]


def read_vision_config(path):
    with open(path) as f:
        d = json.load(f)
    if d.get("model_type") == "siglip":  # SiglipVisionConfig.from_pretrained
        d = d["vision_config"]
    return Config(d)


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class PytorchGELUTanh(nn.Module):
    def forward(self, input):
        return nn.functional.gelu(input, approximate="tanh")


class GELUActivation(nn.Module):
    def forward(self, input):
        return nn.functional.gelu(input)


class QuickGELUActivation(nn.Module):
    def forward(self, input):
        return input * torch.sigmoid(1.702 * input)


ACT2FN = {"gelu_pytorch_tanh": PytorchGELUTanh, "gelu_new": NewGELUActivation, "gelu": GELUActivation,
          "quick_gelu": QuickGELUActivation}


class SiglipVisionEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_dim = config.hidden_size
        self.image_size = config.image_size
        self.patch_size = config.patch_size
        self.patch_embedding = nn.Conv2d(in_channels=config.num_channels, out_channels=self.embed_dim,
                                         kernel_size=self.patch_size, stride=self.patch_size, padding="valid")
        self.num_patches = (self.image_size // self.patch_size) ** 2
        self.num_positions = self.num_patches
        self.position_embedding = nn.Embedding(self.num_positions, self.embed_dim)
        self.register_buffer("position_ids", torch.arange(self.num_positions).expand((1, -1)), persistent=False)

    def forward(self, pixel_values):
        patch_embeds = self.patch_embedding(pixel_values)  # shape = [*, width, grid, grid]
        embeddings = patch_embeds.flatten(2).transpose(1, 2)
        embeddings = embeddings + self.position_embedding(self.position_ids)
        return embeddings


class SiglipAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        assert self.head_dim * self.num_heads == self.embed_dim
        self.scale = self.head_dim ** -0.5
        self.dropout = config.attention_dropout
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim)

    def forward(self, hidden_states):
        batch_size, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(batch_size, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(batch_size, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(batch_size, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scale
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(batch_size, q_len, self.embed_dim)
        return self.out_proj(attn_output)


class SiglipMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.activation_fn = ACT2FN[config.hidden_act]()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        return self.fc2(hidden_states)


class SiglipEncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.self_attn = SiglipAttention(config)
        self.layer_norm1 = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_eps)
        self.mlp = SiglipMLP(config)
        self.layer_norm2 = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.layer_norm1(hidden_states)
        hidden_states = self.self_attn(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.layer_norm2(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class SiglipEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([SiglipEncoderLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, inputs_embeds):
        hidden_states = inputs_embeds
        for encoder_layer in self.layers:
            hidden_states = encoder_layer(hidden_states)
        return hidden_states


class SiglipMultiheadAttentionPoolingHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, config.hidden_size))
        self.attention = torch.nn.MultiheadAttention(config.hidden_size, config.num_attention_heads, batch_first=True)
        self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = SiglipMLP(config)

    def forward(self, hidden_state):
        batch_size = hidden_state.shape[0]
        probe = self.probe.repeat(batch_size, 1, 1)
        hidden_state = self.attention(probe, hidden_state, hidden_state)[0]
        residual = hidden_state
        hidden_state = self.layernorm(hidden_state)
        hidden_state = residual + self.mlp(hidden_state)
        return hidden_state[:, 0]


class SiglipVisionTransformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        embed_dim = config.hidden_size
        self.embeddings = SiglipVisionEmbeddings(config)
        self.encoder = SiglipEncoder(config)
        self.post_layernorm = nn.LayerNorm(embed_dim, eps=config.layer_norm_eps)
        self.use_head = True if not hasattr(config, "vision_use_head") else config.vision_use_head
        if self.use_head:
            self.head = SiglipMultiheadAttentionPoolingHead(config)

    def forward(self, pixel_values):
        hidden_states = self.embeddings(pixel_values)
        last_hidden_state = self.encoder(inputs_embeds=hidden_states)
        last_hidden_state = self.post_layernorm(last_hidden_state)
        pooler_output = self.head(last_hidden_state) if self.use_head else None
        return last_hidden_state, pooler_output


class SiglipVisionModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.vision_model = SiglipVisionTransformer(config)

    def forward(self, pixel_values):
        return self.vision_model(pixel_values=pixel_values)


# ---- checkpoints ----

def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    for name, t in sorted(model.state_dict().items()):
        n = torch.randn(t.shape, generator=g)
        if "norm" in name and name.endswith(".weight"):
            t.copy_(1 + 0.3 * n)  # never all ones
        elif name.endswith("bias"):
            t.copy_(0.3 * n)  # never zero
        elif "position_embedding" in name or name.endswith("probe"):
            t.copy_(0.5 * n)
        else:
            fan_in = t[0].numel() if t.dim() > 1 else t.numel()
            t.copy_(n / math.sqrt(fan_in))


VISION_CASES = {
    # A SiglipVisionModel directory: vision_use_head left out (True), the defaults' activation.
    "siglip-vision-head": ({
        "architectures": ["SiglipVisionModel"], "model_type": "siglip_vision_model", "hidden_size": 32,
        "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_channels": 3,
        "image_size": 32, "patch_size": 8, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
        "attention_dropout": 0.0, "torch_dtype": "float32", "transformers_version": "4.47.1",
    }, ["rgb-300x200.png", "rgba-64x48.png", "photo-96x80.jpg"]),
    # A full SiglipModel directory (text tower and logit scale beside the vision tower): the vision tower is
    # read from vision_config; no pooling head, exact GELU, a patch grid of 4×4 patches of 6 pixels.
    "siglip-full-nohead": ({
        "architectures": ["SiglipModel"], "model_type": "siglip", "initializer_factor": 1.0,
        "dtype": "float32", "transformers_version": "5.0.0",
        "text_config": {"model_type": "siglip_text_model", "hidden_size": 16, "intermediate_size": 24,
                        "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 40,
                        "max_position_embeddings": 8},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 24, "intermediate_size": 40,
                          "num_hidden_layers": 3, "num_attention_heads": 3, "image_size": 24, "patch_size": 6,
                          "hidden_act": "gelu", "layer_norm_eps": 1e-5, "vision_use_head": False},
    }, ["gray-50x70.png", "rgb-37x29.png"]),
    # quick_gelu with the head, one image, patch = image / 2.
    "siglip-vision-quickgelu": ({
        "architectures": ["SiglipVisionModel"], "model_type": "siglip_vision_model", "hidden_size": 16,
        "intermediate_size": 20, "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 16,
        "patch_size": 8, "hidden_act": "quick_gelu", "vision_use_head": True,
    }, ["palette-40x40.png"]),
}


def text_tensors(cfg, g):
    """A stand-in for a SiglipModel's text tower: the loader must skip these, not choke on them."""
    t = cfg["text_config"]
    d, v = t["hidden_size"], t["vocab_size"]
    return {"text_model.embeddings.token_embedding.weight": torch.randn(v, d, generator=g),
            "text_model.embeddings.position_embedding.weight": torch.randn(t["max_position_embeddings"], d, generator=g),
            "text_model.final_layer_norm.weight": torch.randn(d, generator=g),
            "text_model.head.weight": torch.randn(d, d, generator=g),
            "logit_scale": torch.randn(1, generator=g), "logit_bias": torch.randn(1, generator=g)}


def make_vision(name, cfg_json, image_names, seed):
    d = os.path.join(VISION, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
        f.write("\n")
    config = read_vision_config(os.path.join(d, "config.json"))
    model = SiglipVisionModel(config).eval()
    randomize(model, seed)
    tensors = dict(model.state_dict())
    if cfg_json["model_type"] == "siglip":
        tensors.update(text_tensors(cfg_json, torch.Generator().manual_seed(seed + 1)))
    save_file(tensors, os.path.join(d, "model.safetensors"))
    proc = dict(SIGLIP_PROCESSOR, size={"height": config.image_size, "width": config.image_size})
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(proc, f, indent=2, sort_keys=True)
        f.write("\n")
    # Read back what was written, so the goldens come from the checkpoint itself.
    model = SiglipVisionModel(read_vision_config(os.path.join(d, "config.json"))).eval()
    state = read_safetensors(os.path.join(d, "model.safetensors"))
    own = model.state_dict()
    model.load_state_dict({k: state[k] for k in own}, strict=True)
    pixel_values = np.stack([preprocess(os.path.join(IMAGEPROC, "images", n), proc)[1] for n in image_names])
    last, pooled = model(torch.from_numpy(pixel_values))
    golden = {"name": name, "images": image_names, "pixel_values": [fmt(v) for v in pixel_values.reshape(-1)],
              "pixel_values_shape": list(pixel_values.shape),
              "last_hidden_state": [fmt(v) for v in last.reshape(-1).tolist()],
              "last_hidden_state_shape": list(last.shape)}
    if pooled is not None:
        golden["pooler_output"] = [fmt(v) for v in pooled.reshape(-1).tolist()]
        golden["pooler_output_shape"] = list(pooled.shape)
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print(f"{name}: {len(own)} tensors, last_hidden_state {list(last.shape)}, pooled "
          f"{None if pooled is None else list(pooled.shape)}")


def main():
    images = make_images(os.path.join(IMAGEPROC, "images"))
    with open(os.path.join(IMAGEPROC, "preprocessor_config.json"), "w") as f:
        json.dump(SIGLIP_PROCESSOR, f, indent=2, sort_keys=True)
        f.write("\n")
    make_processed(images, os.path.join(IMAGEPROC, "processed"))
    for i, (name, (cfg, imgs)) in enumerate(sorted(VISION_CASES.items())):
        make_vision(name, cfg, imgs, seed=4300 + i)


if __name__ == "__main__":
    main()
