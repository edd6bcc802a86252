#!/usr/bin/env python3
"""Writes N random PEFT LoRA adapters (bf16) for a Llama-shaped model, on all seven projections.

Usage: make_lora_adapters.py OUT_DIR N RANK LAYERS HIDDEN INTERMEDIATE Q_SIZE KV_SIZE
Each adapter is OUT_DIR/a<i>/{adapter_config.json, adapter_model.safetensors}. Used by
tools/gpu/lora_bench.sh on the GPU machine (torch and safetensors are there).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file


def main():
    out, n, rank, layers, hidden, inter, q, kv = sys.argv[1], *map(int, sys.argv[2:9])
    shapes = {"self_attn.q_proj": (q, hidden), "self_attn.k_proj": (kv, hidden), "self_attn.v_proj": (kv, hidden),
              "self_attn.o_proj": (hidden, q), "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
              "mlp.down_proj": (hidden, inter)}
    for i in range(n):
        d = os.path.join(out, f"a{i}")
        os.makedirs(d, exist_ok=True)
        g = torch.Generator().manual_seed(i)
        tensors = {}
        for layer in range(layers):
            for name, (o, k) in shapes.items():
                p = f"base_model.model.model.layers.{layer}.{name}"
                tensors[p + ".lora_A.weight"] = (torch.rand(rank, k, generator=g) - 0.5).mul(0.02).bfloat16()
                tensors[p + ".lora_B.weight"] = (torch.rand(o, rank, generator=g) - 0.5).mul(0.02).bfloat16()
        save_file(tensors, os.path.join(d, "adapter_model.safetensors"))
        cfg = {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "use_rslora": False, "bias": "none",
               "target_modules": [n.split(".")[1] for n in shapes]}
        with open(os.path.join(d, "adapter_config.json"), "w") as f:
            json.dump(cfg, f)


if __name__ == "__main__":
    main()
