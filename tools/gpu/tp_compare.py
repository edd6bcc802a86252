#!/usr/bin/env python3
"""Compares two `graphserve generate --output-json` files: first divergent token per prompt and
the relative L2 distance of the sampled tokens' logprobs (+ top ones) over the common prefix."""
import json
import math
import sys

a, b, label = json.load(open(sys.argv[1]))["outputs"], json.load(open(sys.argv[2]))["outputs"], sys.argv[3]
for i, (x, y) in enumerate(zip(a, b)):
    ta, tb = x["token_ids"], y["token_ids"]
    div = next((k for k in range(min(len(ta), len(tb))) if ta[k] != tb[k]), None)
    n = div if div is not None else min(len(ta), len(tb))
    num = den = 0.0
    for ra, rb in zip(x["logprobs"][:n], y["logprobs"][:n]):
        for u, v in zip(ra, rb):
            num += (u - v) ** 2
            den += u * u
    rel = math.sqrt(num / den) if den > 0 else float("nan")
    print(f"{label} prompt {i}: {len(ta)} tokens, first divergence "
          f"{'none' if div is None else div}, logprobs rel-L2 {rel:.2e} over {n} tokens")
