"""FP8 (e4m3) checkpoints of small random models, in the layouts graphserve loads, with HF's
greedy output of the same model in f32 on the dequantized weights (make_family_fixtures.py fp8).

Layouts (config.json quantization_config, tensors next to each Linear weight):
  fp8_channel  compressed-tensors float-quantized, strategy channel: weight_scale [N, 1],
               dynamic per-token activations, ignore [lm_head] (Llama)
  fp8_block    quant_method fp8, weight_block_size [128, 128]: weight_scale_inv
               [ceil(N/128), ceil(K/128)], activation_scheme dynamic (Qwen3 layout; dims not
               multiples of 128 so partial blocks are covered)
  fp8_tensor   quant_method fp8 per-tensor: weight_scale [], static input_scale [], k_scale and
               v_scale per layer (Llama, the older FP8 layout)
The reference replaces each projection's weight by its exact dequantization (fp8 * scale in
f32), so graphserve's CPU reference must reproduce HF's tokens and logits as the f32 families.
"""
import json
import os
import shutil

import torch
from safetensors.torch import save_file

E4M3_MAX = 448.0
PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def layouts():
    return {
        "fp8_channel": ("llama", dict(), "channel"),
        "fp8_block": ("qwen3", dict(hidden_size=256, intermediate_size=320, head_dim=64, num_attention_heads=4,
                                    num_key_value_heads=2, tie_word_embeddings=True), "block"),
        "fp8_tensor": ("llama", dict(), "tensor"),
    }


def quantize(w, kind):
    """(fp8 weight, scale tensor, dequantized f32 weight) of one [N, K] projection."""
    w = w.float()
    if kind == "block":
        n, k = w.shape
        bn, bk = (n + 127) // 128, (k + 127) // 128
        s = torch.zeros(bn, bk)
        for i in range(bn):
            for j in range(bk):
                s[i, j] = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128].abs().amax().clamp(min=1e-8) / E4M3_MAX
        full = s.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
    elif kind == "channel":
        s = (w.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / E4M3_MAX)
        full = s
    else:
        s = w.abs().amax().clamp(min=1e-8) / E4M3_MAX
        full = s
    q = (w / full).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, s, q.float() * full


def quant_config(kind):
    if kind == "channel":
        return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
                "ignore": ["lm_head"],
                "config_groups": {"group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "dynamic": False,
                                "symmetric": True},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True,
                                          "symmetric": True}}}}
    if kind == "block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    return {"quant_method": "fp8", "activation_scheme": "static"}


def cmd_fp8(out_dir, tok_dir, base):
    prompts = base.encode_prompts(tok_dir)
    report = {}
    for name, (mt, extra, kind) in layouts().items():
        try:
            model = base.build(mt, dict(rope_parameters=base.rope("default"), **extra))
            tensors = {}
            with torch.no_grad():
                for pname, p in model.named_parameters():
                    layer_proj = pname.endswith(".weight") and pname.split(".")[-2] in PROJ
                    if not layer_proj:
                        tensors[pname] = p.detach().float().contiguous()
                        continue
                    q, s, deq = quantize(p, kind)
                    stem = pname[:-len("weight")]
                    tensors[pname] = q.contiguous()
                    tensors[stem + ("weight_scale_inv" if kind == "block" else "weight_scale")] = s.float().contiguous()
                    if kind == "tensor":
                        tensors[stem + "input_scale"] = torch.tensor(0.02)
                    p.copy_(deq)
                if kind == "tensor":
                    for i in range(model.config.num_hidden_layers):
                        tensors[f"model.layers.{i}.self_attn.k_scale"] = torch.tensor(1.0)
                        tensors[f"model.layers.{i}.self_attn.v_scale"] = torch.tensor(1.0)
            if model.config.tie_word_embeddings:
                tensors.pop("lm_head.weight", None)
            d = os.path.join(out_dir, name)
            os.makedirs(d, exist_ok=True)
            save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
            cfg = model.config.to_dict()
            cfg["architectures"] = [type(model).__name__]  # to_dict() of a from_config model has none
            cfg["quantization_config"] = quant_config(kind)
            for key in ("torch_dtype", "dtype"):  # what real FP8 releases say they compute in
                if key in cfg or key == "torch_dtype":
                    cfg[key] = "bfloat16"
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f, indent=1)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(tok_dir, f), d)
            res = dict(prompts=prompts, steps=base.STEPS, logit_steps=base.LOGIT_STEPS, tokens=[], logits=[])
            for p in prompts:
                t, l = base.greedy(model, p, "cpu")
                res["tokens"].append(t)
                res["logits"].append([[float(f"{v:.7g}") for v in row.tolist()] for row in l])
            with open(os.path.join(d, "hf_greedy.json"), "w") as f:
                json.dump(res, f, separators=(",", ":"))
            report[name] = dict(ok=True, tokens=res["tokens"])
            print(name, "ok", res["tokens"][0][:12], flush=True)
        except Exception as e:  # one layout's failure must not hide the others'
            report[name] = dict(ok=False, error=repr(e))
            print(name, "FAILED", repr(e), flush=True)
    return report
