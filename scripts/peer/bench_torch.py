#!/usr/bin/python3
"""PyTorch peer of `temper bench model`: the same Llama-style presets, trained and sampled the same way.

What is identical to Temper (algorithms/model, tpu/bench.go, tpu/train.go):
  - architecture: token embedding, per block RMSNorm(eps) -> fused QKV projection -> RoPE (rotate-half,
    theta) on q and k -> grouped-query attention (heads grouped by KV head, no repeat of K/V, causal) ->
    output projection -> residual, RMSNorm -> fused gate|up -> SwiGLU -> down -> residual; final RMSNorm;
    tied output head (logits = h . embed^T). Linear weights are stored [in, out] (x @ W) as Temper does.
  - init: linear and embedding weights ~ N(0, 0.02^2), norm scales 1 (model.InitWeights; the values differ,
    the distribution does not).
  - training: batch x seq random tokens (seq+1 per row: inputs and next-token targets), mean cross-entropy,
    global-norm clipping at 1.0, AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 on every
    weight but the RMSNorm scales), a step skipped when the loss or gradient norm is not finite.
    One untimed step first (Temper's first step compiles), then `steps` timed steps.
  - generation: prompts x prompt_len random tokens, greedy decoding of gen_tokens new tokens with a KV cache
    preallocated as [batch, kv_heads, cache, head_dim] (cache = power of two >= 32 holding prompt + new
    tokens): one prefill over the prompt, then one decode step per token writing its K/V into the cache in
    place; each token's log-probability is computed as Temper reports it. One untimed call, then `gen_calls`
    timed calls.
Decode attends over the filled part of the cache (what an inference engine does); --decode-attend full
attends over the whole cache with a mask (Temper's decode attends over the filled part rounded up to 32 columns).

Thread settings are explicit: --torch-threads (torch.set_num_threads), --interop-threads and --blas-threads
(OPENBLAS_NUM_THREADS, set before torch is imported). Prints one JSON object on stdout; progress on stderr.
"""
import argparse
import json
import math
import os
import sys
import time

PRESETS = {
    # name: (d_model, layers, heads, kv_heads, head_dim, ffn), as algorithms/model/config.go's llamaStyle
    "tiny": (64, 2, 4, 2, 16, 128),
    "small": (128, 5, 4, 2, 32, 384),
    "base": (384, 6, 6, 2, 64, 1024),
}
VOCAB = 264  # model.DefaultVocab
ROPE_THETA = 10000.0
NORM_EPS = 1e-5
INIT_STD = 0.02
LR = 1e-3
WEIGHT_DECAY = 0.01
CLIP_NORM = 1.0
MASKED = -1e9  # algorithms/model's maskedScore


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", default="tiny,small,base")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=5, help="timed training steps after the first")
    p.add_argument("--gen-prompts", type=int, default=64, help="prompts per generation call; < 0 skips generation")
    p.add_argument("--gen-prompt-len", type=int, default=16)
    p.add_argument("--gen-tokens", type=int, default=64)
    p.add_argument("--gen-calls", type=int, default=1, help="timed generation calls after the first")
    p.add_argument("--decode-attend", choices=["filled", "full"], default="filled")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--interop-threads", type=int, default=1)
    p.add_argument("--blas-threads", type=int, default=0, help="OPENBLAS_NUM_THREADS; 0: leave the environment as it is")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", metavar="FILE", help="instead of benchmarking, load Temper's weights and inputs from the "
                   "JSON FILE (scripts/peer's test writes it) and print this model's logits, losses and generations")
    a = p.parse_args(argv)
    for name in a.presets.split(","):
        if name not in PRESETS:
            p.error(f"--presets: unknown preset {name!r}: allowed {sorted(PRESETS)}")
    if a.batch <= 0 or a.seq < 2 or a.steps <= 0 or a.gen_calls <= 0:
        p.error("--batch, --steps and --gen-calls must be > 0 and --seq >= 2")
    return a


ARGS = parse_args(sys.argv[1:])
if ARGS.blas_threads > 0:
    # Read by OpenBLAS when it loads, i.e. when torch is imported: it must be set first.
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(ARGS.torch_threads)
try:
    torch.set_num_interop_threads(ARGS.interop_threads)
except RuntimeError:
    pass  # already started: keep the value reported below


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Model(torch.nn.Module):
    def __init__(self, d, layers, heads, kv_heads, head_dim, ffn, gen):
        super().__init__()
        self.d, self.nl, self.nh, self.nkv, self.hd, self.ffn = d, layers, heads, kv_heads, head_dim, ffn
        width = (heads + 2 * kv_heads) * head_dim

        def normal(*shape):
            return torch.nn.Parameter(torch.empty(*shape).normal_(0.0, INIT_STD, generator=gen))

        def ones(n):
            return torch.nn.Parameter(torch.ones(n))

        self.embed = normal(VOCAB, d)
        self.attn_norm = torch.nn.ParameterList([ones(d) for _ in range(layers)])
        self.qkv = torch.nn.ParameterList([normal(d, width) for _ in range(layers)])
        self.attn_out = torch.nn.ParameterList([normal(heads * head_dim, d) for _ in range(layers)])
        self.mlp_norm = torch.nn.ParameterList([ones(d) for _ in range(layers)])
        self.gate_up = torch.nn.ParameterList([normal(d, 2 * ffn) for _ in range(layers)])
        self.down = torch.nn.ParameterList([normal(ffn, d) for _ in range(layers)])
        self.final_norm = ones(d)
        inv = [1.0 / (ROPE_THETA ** (2 * i / head_dim)) for i in range(head_dim // 2)]
        self.register_buffer("inv_freq", torch.tensor(inv, dtype=torch.float32), persistent=False)

    def decayed(self):
        """Parameters that take weight decay (all but the RMSNorm scales), and the others."""
        norms = {id(p) for p in [*self.attn_norm, *self.mlp_norm, self.final_norm]}
        params = list(self.parameters())
        return [p for p in params if id(p) not in norms], [p for p in params if id(p) in norms]

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * w

    def rope_tables(self, positions):
        # positions [b, s] -> cos, sin [b, s, 1, hd] (frequency i at columns i and i + hd/2)
        ang = positions.to(torch.float32).unsqueeze(-1) * self.inv_freq
        ang = torch.cat([ang, ang], -1).unsqueeze(2)
        return ang.cos(), ang.sin()

    @staticmethod
    def rope(x, cos, sin):
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    def attention(self, l, h, cos, sin, bias, cache, slot):
        """h [b, s, d] -> [b, s, d]. cache: None (training), or (k, v) [b, kv, S, hd] written in place at
        columns slot..slot+s; attention then runs over the cache columns bias covers."""
        b, s, _ = h.shape
        nh, nkv, hd = self.nh, self.nkv, self.hd
        grp = nh // nkv
        qkv = h.reshape(b * s, self.d) @ self.qkv[l]
        q = qkv[:, : nh * hd].reshape(b, s, nh, hd)
        k = qkv[:, nh * hd: (nh + nkv) * hd].reshape(b, s, nkv, hd)
        v = qkv[:, (nh + nkv) * hd:].reshape(b, s, nkv, hd)
        q = self.rope(q, cos, sin) * (1.0 / math.sqrt(hd))
        k = self.rope(k, cos, sin)
        # heads grouped by KV head: q [b*kv, grp*s, hd] against un-repeated k, v [b*kv, keys, hd]
        q = q.reshape(b, s, nkv, grp, hd).permute(0, 2, 3, 1, 4).reshape(b * nkv, grp * s, hd)
        k = k.permute(0, 2, 1, 3)
        v = v.permute(0, 2, 1, 3)
        if cache is not None:
            ck, cv = cache
            ck[:, :, slot: slot + s] = k
            cv[:, :, slot: slot + s] = v
            keys = bias.shape[-1]
            k, v = ck[:, :, :keys], cv[:, :, :keys]
        keys = k.shape[2]
        scores = torch.bmm(q, k.reshape(b * nkv, keys, hd).transpose(1, 2))
        scores = scores.reshape(b, nh, s, keys) + bias
        probs = torch.softmax(scores, -1).reshape(b * nkv, grp * s, keys)
        out = torch.bmm(probs, v.reshape(b * nkv, keys, hd))
        out = out.reshape(b, nkv, grp, s, hd).permute(0, 3, 1, 2, 4).reshape(b * s, nh * hd)
        return (out @ self.attn_out[l]).reshape(b, s, self.d)

    def mlp(self, l, h):
        b, s, _ = h.shape
        gu = h.reshape(b * s, self.d) @ self.gate_up[l]
        act = F.silu(gu[:, : self.ffn]) * gu[:, self.ffn:]
        return (act @ self.down[l]).reshape(b, s, self.d)

    def forward(self, tokens, positions, bias, caches=None, slot=0):
        """tokens, positions [b, s]; bias [b or 1, 1, s, keys] additive -> hidden [b, s, d]"""
        x = self.embed[tokens]
        cos, sin = self.rope_tables(positions)
        for l in range(self.nl):
            c = None if caches is None else caches[l]
            x = x + self.attention(l, self.rms(x, self.attn_norm[l]), cos, sin, bias, c, slot)
            x = x + self.mlp(l, self.rms(x, self.mlp_norm[l]))
        return self.rms(x, self.final_norm)

    def logits(self, h):
        return h @ self.embed.t()


def causal_bias(s):
    return torch.full((s, s), MASKED).triu(1).reshape(1, 1, s, s)


def bucket(n, lo):
    b = lo
    while b < n:
        b *= 2
    return b


def make_optimizer(m):
    decay, no_decay = m.decayed()
    groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=LR, betas=(0.9, 0.999), eps=1e-8)
    try:
        return torch.optim.AdamW(groups, foreach=True, **kw), True
    except TypeError:  # a torch without the multi-tensor AdamW
        return torch.optim.AdamW(groups, **kw), False


def train_step(m, opt, data):
    """One step on data [b, s+1] (inputs and next-token targets); returns the loss before the update."""
    b, s = data.shape[0], data.shape[1] - 1
    tokens, targets = data[:, :-1], data[:, 1:]
    opt.zero_grad(set_to_none=True)
    logits = m.logits(m(tokens, torch.arange(s).expand(b, s), causal_bias(s)))
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(m.parameters(), CLIP_NORM)
    if torch.isfinite(loss) and torch.isfinite(gnorm):
        opt.step()
    return float(loss)


@torch.no_grad()
def generate(m, prompts, new, attend):
    """Greedy decoding of new tokens after prompts [n, p] with a KV cache; returns tokens [n, new] and
    their log-probabilities."""
    n, plen = prompts.shape
    cache_len = bucket(bucket(plen, 8) + new, 32)  # as algorithms/model's Generator plans it
    caches = [(torch.zeros(n, m.nkv, cache_len, m.hd), torch.zeros(n, m.nkv, cache_len, m.hd)) for _ in range(m.nl)]
    h = m(prompts, torch.arange(plen).expand(n, plen), causal_bias(plen), caches, 0)
    logits = m.logits(h[:, -1])
    out = torch.empty(n, new, dtype=torch.long)
    logprobs = torch.empty(n, new)
    for t in range(new):
        tok = logits.argmax(-1)
        out[:, t] = tok
        logprobs[:, t] = torch.log_softmax(logits, -1).gather(1, tok.unsqueeze(1)).squeeze(1)
        if t == new - 1:
            break
        slot = plen + t
        keys = slot + 1 if attend == "filled" else cache_len
        bias = torch.zeros(1, 1, 1, keys)
        bias[..., slot + 1:] = MASKED
        h = m(tok.unsqueeze(1), torch.full((n, 1), slot), bias, caches, slot)
        logits = m.logits(h[:, -1])
    return out, logprobs


def new_model(name, seed):
    d, layers, heads, kv, hd, ffn = PRESETS[name]
    return Model(d, layers, heads, kv, hd, ffn, torch.Generator().manual_seed(seed))


def bench_preset(name, a):
    m = new_model(name, a.seed)
    gen = torch.Generator().manual_seed(a.seed + 1)
    params = sum(p.numel() for p in m.parameters())
    opt, foreach = make_optimizer(m)
    data = torch.randint(0, VOCAB, (a.batch, a.seq + 1), generator=gen)

    log(f"peer {name}: first train step ({a.batch}x{a.seq})")
    t0 = time.perf_counter()
    loss_first = train_step(m, opt, data)
    first = time.perf_counter() - t0
    log(f"peer {name}: {a.steps} timed train steps")
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss_last = train_step(m, opt, data)
        times.append(time.perf_counter() - t0)
    row = {"preset": name, "params": params, "batch": a.batch, "seq": a.seq, "steps": a.steps,
           "first_step_seconds": first, "step_seconds": times,
           "train_tokens_per_sec": a.batch * a.seq * len(times) / sum(times),
           "loss_first": loss_first, "loss_last": loss_last, "adamw_foreach": foreach}

    if a.gen_prompts > 0:
        n, plen, new = a.gen_prompts, a.gen_prompt_len, a.gen_tokens
        prompts = torch.randint(0, VOCAB, (n, plen), generator=gen)
        log(f"peer {name}: generation {n}x{new} (1 + {a.gen_calls} calls)")
        t0 = time.perf_counter()
        generate(m, prompts, new, a.decode_attend)
        gfirst = time.perf_counter() - t0
        gtimes = []
        for _ in range(a.gen_calls):
            t0 = time.perf_counter()
            toks, _ = generate(m, prompts, new, a.decode_attend)
            gtimes.append(time.perf_counter() - t0)
            if tuple(toks.shape) != (n, new):
                raise SystemExit(f"peer {name}: generated {tuple(toks.shape)}, want {(n, new)}")
        row.update({"gen_prompts": n, "gen_prompt_len": plen, "gen_tokens": new,
                    "gen_cache_len": bucket(bucket(plen, 8) + new, 32),
                    "gen_first_call_seconds": gfirst, "gen_seconds": gtimes,
                    "cached_tokens_per_sec": n * new * len(gtimes) / sum(gtimes)})
    return row


def load_temper(m, weights):
    """Sets m's parameters from Temper's exported weights (internal path -> flat row-major values;
    algorithms/model/weights.go's Var* paths, linear weights [in, out] as here)."""
    weights = dict(weights)

    def put(p, path):
        values = weights.pop(path)
        if len(values) != p.numel():
            raise SystemExit(f"check: {path}: {len(values)} values for shape {tuple(p.shape)}")
        p.data.copy_(torch.tensor(values, dtype=torch.float32).reshape(p.shape))

    put(m.embed, "embed/tokens")
    for l in range(m.nl):
        put(m.attn_norm[l], f"layers/{l}/attn_norm/scale")
        put(m.qkv[l], f"layers/{l}/attn/qkv")
        put(m.attn_out[l], f"layers/{l}/attn/out")
        put(m.mlp_norm[l], f"layers/{l}/mlp_norm/scale")
        put(m.gate_up[l], f"layers/{l}/mlp/gate_up")
        put(m.down[l], f"layers/{l}/mlp/down")
    put(m.final_norm, "final_norm/scale")
    if weights:
        raise SystemExit(f"check: Temper weights this model lacks: {sorted(weights)}")


def check(a):
    """Runs Temper's inputs through this model with Temper's weights: what it prints, the caller
    compares with what Temper computed."""
    with open(a.check) as f:
        c = json.load(f)
    m = new_model(c["preset"], a.seed)
    load_temper(m, c["weights"])
    data = torch.tensor(c["tokens"])
    b, s = data.shape[0], data.shape[1] - 1
    with torch.no_grad():
        logits = m.logits(m(data[:, :-1], torch.arange(s).expand(b, s), causal_bias(s)))
    prompts = torch.tensor(c["prompts"])
    out = {"logits": logits.flatten().tolist()}
    for attend in ("filled", "full"):
        toks, lps = generate(m, prompts, c["new_tokens"], attend)
        out["gen_" + attend] = {"tokens": toks.tolist(), "logprobs": lps.tolist()}
    opt, _ = make_optimizer(m)
    out["losses"] = [train_step(m, opt, data) for _ in range(c["train_steps"])]
    print(json.dumps(out))


def blas_library():
    """The BLAS shared library torch's process has mapped (Debian's torch calls libblas.so.3, which the
    alternatives system points at OpenBLAS or at the slow reference BLAS)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if "blas" in base or "lapack" in base:
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs)


def openblas_core():
    """The kernel family OpenBLAS runs (e.g. Haswell, SkylakeX, Cooperlake): OPENBLAS_CORETYPE, when set,
    forces it, and AVX2 kernels on an AVX-512 machine are about half as fast."""
    import ctypes
    for lib in blas_library():
        if "libopenblas" in lib:
            try:
                fn = ctypes.CDLL(lib).openblas_get_corename
                fn.restype = ctypes.c_char_p
                return fn().decode()
            except (OSError, AttributeError):
                pass
    return ""


def matmul_gflops():
    """GFLOP/s of a 512x512 fp32 matmul, by wall time and per CPU-second (the latter tells OpenBLAS, tens
    of GFLOP per CPU-second, from the reference BLAS, ~3, even on a busy machine)."""
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    for _ in range(3):
        a @ b
    n, t0, c0 = 10, time.perf_counter(), time.process_time()
    for _ in range(n):
        a @ b
    flop = 2 * 512 ** 3 * n / 1e9
    return flop / (time.perf_counter() - t0), flop / max(time.process_time() - c0, 1e-9)


def main():
    a = ARGS
    if a.check:
        check(a)
        return
    torch.manual_seed(a.seed)
    rows = [bench_preset(name, a) for name in a.presets.split(",")]
    wall, per_cpu = matmul_gflops()
    print(json.dumps({
        "peer": "pytorch",
        "torch_version": torch.__version__,
        "python": sys.executable,
        "blas_libraries": blas_library(),
        "openblas_core": openblas_core(),
        "matmul512_gflops": wall,
        "matmul512_gflops_per_cpu_second": per_cpu,
        "threads": {"torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
                    "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", ""),
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", ""),
                    "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "")},
        "decode_attend": a.decode_attend,
        "rows": rows,
    }, indent=1))


if __name__ == "__main__":
    main()
