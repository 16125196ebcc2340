"""Golden distributions for algorithms/sample: what transformers' sampling does to one step's logits.

A PyTorch re-implementation that follows transformers' source (src/transformers/generation/
logits_process.py: RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper, MinPLogitsWarper) in the order generation/utils.py's _get_logits_processor builds
them: the repetition penalty among the processors, then the warpers temperature, top-k, top-p, min-p;
the token is drawn from softmax of the result (greedy: its argmax). transformers itself is not
installable here; torch is Debian's python3-torch.

Run: /usr/bin/python3 algorithms/sample/testdata/warpers.py > algorithms/sample/testdata/warpers.json
"""
import json

import torch


def repetition_penalty(input_ids, scores, penalty):
    # RepetitionPenaltyLogitsProcessor.__call__
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return scores.scatter(1, input_ids, score)


def temperature(scores, t):
    # TemperatureLogitsWarper.__call__
    return scores / t


def top_k(scores, k, filter_value=-float("inf"), min_tokens_to_keep=1):
    # TopKLogitsWarper.__call__
    k = min(max(k, min_tokens_to_keep), scores.size(-1))
    indices_to_remove = scores < torch.topk(scores, k)[0][..., -1, None]
    return scores.masked_fill(indices_to_remove, filter_value)


def top_p(scores, p, filter_value=-float("inf"), min_tokens_to_keep=1):
    # TopPLogitsWarper.__call__
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - p)
    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, filter_value)


def min_p(scores, mp, filter_value=-float("inf"), min_tokens_to_keep=1):
    # MinPLogitsWarper.__call__
    probs = torch.softmax(scores, dim=-1)
    top_probs = probs.amax(dim=-1, keepdim=True)
    scaled_min_p = mp * top_probs
    tokens_to_remove = probs < scaled_min_p
    sorted_indices = torch.argsort(scores, descending=True, dim=-1)
    sorted_indices_to_remove = torch.gather(tokens_to_remove, dim=-1, index=sorted_indices)
    sorted_indices_to_remove[..., :min_tokens_to_keep] = False
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, filter_value)


def distribution(logits, seen, c):
    scores = logits.clone().unsqueeze(0)
    if c["repetition_penalty"] not in (0, 1) and seen:
        scores = repetition_penalty(torch.tensor([seen]), scores, c["repetition_penalty"])
    if c["temperature"] == 0:  # greedy: the processors, then argmax
        out = torch.zeros_like(scores)
        out[0, int(torch.argmax(scores))] = 1
        return out[0]
    if c["temperature"] != 1:
        scores = temperature(scores, c["temperature"])
    if c["top_k"]:
        scores = top_k(scores, c["top_k"])
    if c["top_p"] and c["top_p"] < 1:
        scores = top_p(scores, c["top_p"])
    if c["min_p"]:
        scores = min_p(scores, c["min_p"])
    return torch.softmax(scores.double(), dim=-1)[0]


def main():
    g = torch.Generator().manual_seed(7)
    cases = []
    for name, cfg, seen in [
        ("penalty", dict(repetition_penalty=1.3), [0, 3, 3, 7, 9]),
        ("penalty, temperature 0.7", dict(repetition_penalty=1.5, temperature=0.7), [1, 2, 5, 11]),
        ("min_p 0.3", dict(min_p=0.3), []),
        ("top_k 5, min_p 0.1", dict(top_k=5, min_p=0.1), []),
        ("top_p 0.8, min_p 0.05, temperature 1.5, penalty 1.2", dict(top_p=0.8, min_p=0.05, temperature=1.5, repetition_penalty=1.2), [4, 6, 8]),
        ("top_k 8, top_p 0.9, min_p 0.2, temperature 0.5", dict(top_k=8, top_p=0.9, min_p=0.2, temperature=0.5), []),
        ("greedy with penalty", dict(temperature=0, repetition_penalty=4.0), [0, 1, 2, 3, 4, 5]),
    ]:
        c = dict(temperature=1.0, top_k=0, top_p=0.0, min_p=0.0, repetition_penalty=0.0)
        c.update(cfg)
        logits = (torch.randn(12, generator=g) * 2).to(torch.float32)
        probs = distribution(logits, seen, c)
        cases.append(dict(name=name, logits=logits.tolist(), seen=seen, probs=probs.tolist(), **c))
    print(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main()
