#!/usr/bin/env python3
"""Small random-weight HF models of each family graphserve serves, with HF's greedy output.

Run where torch + transformers are installed (the GPU machine; no internet needed):
  make_family_fixtures.py fixtures OUT_DIR --tokenizer DIR [--only a,b]   f32 models + hf_greedy.json (CPU)
  make_family_fixtures.py bf16 FIXTURES_DIR OUT.json          HF bf16 greedy/logits on the GPU
  make_family_fixtures.py peer OUT.json [names]                HF decode ms/step, real shapes
  make_family_fixtures.py peer-prefill OUT.json NAMES LENS     HF prefill ms of one prompt a length
  make_family_fixtures.py fp8 OUT_DIR --tokenizer DIR          FP8 checkpoints + HF f32 greedy (CPU)

Each fixture directory holds config.json, model.safetensors (f32), the tokenizer files, and
hf_greedy.json: {prompts, steps, tokens, logit_steps, logits}: for both prompts, the 48 tokens
HF's greedy decoding (with its KV cache, eager attention) picks, and the f32 logits that chose
the tokens at logit_steps (step 0 = the prompt's last position). tests/model/families_test.cpp
compares graphserve with them.
"""
import json
import math
import os
import re
import shutil
import sys
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

STEPS = 48
LOGIT_STEPS = [0, 1, 2, 4, 8, 16, 32, 47]
WINDOW = 24  # shorter than the long prompt
PROMPTS = [
    "Once upon a time, there was a little girl",
    "One day, a little boy named Tim went to the park with his mom. He saw a big red ball and a dog. "
    "The dog was very happy and wanted to play with Tim and the ball",
]

COMMON = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
              tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def rope(kind, theta=10000.0, **extra):
    """rope_parameters (transformers 5) with the legacy keys too."""
    return dict(rope_type=kind, rope_theta=theta, **extra)


def families():
    hd = 16
    longrope = dict(short_factor=[1.0 + 0.05 * i for i in range(hd // 2)],
                    long_factor=[1.5 + 0.5 * i for i in range(hd // 2)], original_max_position_embeddings=64)
    return {
        "llama": ("llama", dict(rope_parameters=rope("default"))),
        "llama3": ("llama", dict(rope_parameters=rope("llama3", 500000.0, factor=8.0, low_freq_factor=1.0,
                                                      high_freq_factor=4.0, original_max_position_embeddings=32))),
        "mistral_swa": ("mistral", dict(sliding_window=WINDOW, rope_parameters=rope("default"))),
        "qwen2": ("qwen2", dict(use_sliding_window=False, rope_parameters=rope("default"))),
        "qwen2_swa": ("qwen2", dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1,
                                    num_hidden_layers=3, rope_parameters=rope("default"))),
        "qwen3": ("qwen3", dict(head_dim=32, tie_word_embeddings=True, rope_parameters=rope("default"))),
        "phi3": ("phi3", dict(rope_parameters=rope("longrope", **longrope), original_max_position_embeddings=64,
                              sliding_window=None, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)),
        "gemma2": ("gemma2", dict(head_dim=hd, query_pre_attn_scalar=24, sliding_window=WINDOW,
                                  attn_logit_softcapping=3.0, final_logit_softcapping=4.0,
                                  hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                                  rope_parameters=rope("default"))),
    }


def moe_families():
    """Mixture-of-experts families; expert widths differ from hidden and hidden / 2 so that the
    fused-tensor layouts of transformers 5 are told apart by shape (hub_state_dict)."""
    return {
        "mixtral": ("mixtral", dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=48,
                                    sliding_window=None, rope_parameters=rope("default", 1e6))),
        "qwen2_moe": ("qwen2_moe", dict(num_experts=8, num_experts_per_tok=4, moe_intermediate_size=40,
                                        shared_expert_intermediate_size=96, norm_topk_prob=False,
                                        decoder_sparse_step=2, num_hidden_layers=3, use_sliding_window=False,
                                        rope_parameters=rope("default"))),
        "qwen3_moe": ("qwen3_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=40,
                                        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
                                        num_hidden_layers=3, head_dim=32, use_sliding_window=False,
                                        rope_parameters=rope("default"))),
        **deepseek_families(),
    }


def deepseek_families():
    """DeepSeek-V2/V3 with multi-head latent attention (kv_lora_rank 32, rope 8, nope 16, v 16),
    shared experts and a dense first layer. V2's YaRN leaves mscale / mscale_all_dim out: HF's
    deepseek_v2 does not apply the mscale_all_dim softmax factor that DeepSeek's own code and
    HF's deepseek_v3 apply, so only V3 checks that factor (mscale = mscale_all_dim = 1)."""
    mla = dict(num_key_value_heads=4, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
               n_routed_experts=8, moe_intermediate_size=24, first_k_dense_replace=1, num_hidden_layers=3)
    yarn = dict(factor=4.0, original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0)
    return {
        "deepseek_v2": ("deepseek_v2", dict(mla, q_lora_rank=None, num_experts_per_tok=2, n_shared_experts=2,
                                            topk_method="group_limited_greedy", n_group=4, topk_group=2,
                                            routed_scaling_factor=1.5, norm_topk_prob=False,
                                            rope_parameters=rope("yarn", **yarn))),
        "deepseek_v2_qlora": ("deepseek_v2", dict(mla, q_lora_rank=24, num_experts_per_tok=3, n_shared_experts=1,
                                                  topk_method="greedy", n_group=None, topk_group=None,
                                                  routed_scaling_factor=1.0, norm_topk_prob=False,
                                                  num_hidden_layers=2, rope_parameters=rope("default"))),
        "deepseek_v3": ("deepseek_v3", dict(mla, q_lora_rank=24, num_experts_per_tok=3, n_shared_experts=1,
                                            n_group=4, topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
                                            rope_interleave=True,
                                            rope_parameters=rope("yarn", **yarn, mscale=1.0, mscale_all_dim=1.0))),
    }


# config.json keys the Hub's DeepSeek checkpoints carry that HF's config classes may drop
HUB_CONFIG_KEYS = {
    "deepseek_v2": dict(scoring_func="softmax"),
    "deepseek_v3": dict(scoring_func="sigmoid", topk_method="noaux_tc"),
}


def hub_config(d, model_type, extra):
    if model_type not in HUB_CONFIG_KEYS:
        return
    path = os.path.join(d, "config.json")
    cfg = json.load(open(path))
    cfg.update(HUB_CONFIG_KEYS.get(model_type, {}))
    for k in ("topk_method", "n_group", "topk_group", "q_lora_rank"):
        if k in extra:
            cfg[k] = extra[k]
    json.dump(cfg, open(path, "w"), indent=2)


def gpt_oss_families():
    """gpt-oss: sliding and full layers alternating (layer 0 sliding), attention sinks, q/k/v/o
    biases, a biased router, interleaved gate/up experts with biases and the clamped SwiGLU, YaRN
    rope (truncate false, as the Hub's) past original_max_position_embeddings. save_pretrained
    writes the Hub's own layout (gate_up_proj [E, H, 2I], down_proj [E, I, H])."""
    yarn = rope("yarn", 150000.0, factor=4.0, beta_fast=32.0, beta_slow=1.0, original_max_position_embeddings=64,
                truncate=False)
    return {
        "gpt_oss": ("gpt_oss", dict(num_local_experts=8, num_experts_per_tok=2, intermediate_size=40, head_dim=16,
                                    layer_types=["sliding_attention", "full_attention"], sliding_window=WINDOW,
                                    attention_bias=True, swiglu_limit=7.0, rope_parameters=yarn)),
    }


def perturb_gpt_oss(model):
    """HF starts every bias but the router's at zero and keeps the experts' activations far below
    swiglu_limit: random biases and sinks, and gate/up scaled so the clamps bind."""
    for name, p in model.named_parameters():
        if name.endswith("bias") or name.endswith("sinks"):
            p.copy_((0.5 if name.endswith("sinks") else 0.1) * torch.randn_like(p))
        if name.endswith("experts.gate_up_proj"):
            p.mul_(6.0)
        if name.endswith("mlp.router.weight"):
            p.mul_(8.0)


def hub_state_dict(model, model_type, hidden, inter):
    """The state dict as the Hub's checkpoints name it: one tensor per expert and projection
    (Mixtral: block_sparse_moe.experts.N.w1 / w3 / w2; Qwen: mlp.experts.N.gate_proj / up_proj /
    down_proj), whatever fused layout this transformers version keeps in memory."""
    out = {}
    mixtral = model_type == "mixtral"
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    for k, v in model.state_dict().items():
        v = v.detach().contiguous()
        if mixtral:
            k = re.sub(r"\.mlp\.(gate|experts)\b", r".block_sparse_moe.\1", k)
        m = re.match(r"(.*\.experts)\.(gate_up_proj|down_proj)$", k)
        if not m or v.dim() != 3:
            out[k] = v
            continue
        for e in range(v.shape[0]):
            w = v[e]
            if m.group(2) == "gate_up_proj":
                if w.shape != (2 * inter, hidden):
                    w = w.t()
                assert w.shape == (2 * inter, hidden), (k, tuple(v.shape))
                out[f"{m.group(1)}.{e}.{names[0]}.weight"] = w[:inter].contiguous()
                out[f"{m.group(1)}.{e}.{names[1]}.weight"] = w[inter:].contiguous()
            else:
                if w.shape != (hidden, inter):
                    w = w.t()
                assert w.shape == (hidden, inter), (k, tuple(v.shape))
                out[f"{m.group(1)}.{e}.{names[2]}.weight"] = w.contiguous()
    return out


def save_hub_format(model, model_type, extra, d, probe):
    """save_pretrained, then model.safetensors rewritten in the Hub's per-expert names, checked
    by loading it back: no missing or unexpected tensors, the same logits."""
    from safetensors.torch import save_file
    model.save_pretrained(d, safe_serialization=True)
    for f in os.listdir(d):
        if f.endswith(".safetensors") or f.endswith(".safetensors.index.json"):
            os.remove(os.path.join(d, f))
    kw = dict(COMMON)
    kw.update(extra)
    inter = kw.get("moe_intermediate_size", kw["intermediate_size"])
    sd = hub_state_dict(model, model_type, kw["hidden_size"], inter)
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    try:  # HF's own loading of the Hub names is a check of the renaming, not a condition for the fixture
        back, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                                          output_loading_info=True)
        bad = {k: list(v)[:4] for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys")}
        x = torch.tensor([probe])
        with torch.no_grad():
            diff = float((back.eval()(input_ids=x).logits - model(input_ids=x).logits).abs().max())
        return f"HF reload: {'ok' if not bad and diff < 1e-5 else 'MISMATCH'} (max |dlogit| {diff:.2e}, {bad})"
    except Exception as e:  # noqa: BLE001
        return f"HF reload failed: {e!r}"[:400]


def build(model_type, extra, dtype=torch.float32):
    kw = dict(COMMON)
    kw.update(extra)
    cfg = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=dtype).to(dtype)
    with torch.no_grad():  # norms start at 1 (0 for Gemma); perturb them so the norm weights matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
            if re.search(r"\.(mlp|block_sparse_moe)\.gate\.weight$", name):  # routers: decisive, no near-ties
                p.mul_(8.0)
        for name, b in model.named_buffers():  # DeepSeek-V3's selection bias: non-zero, so that it matters;
            if name.endswith("e_score_correction_bias"):  # >= 0: HF masks groups with 0.0, DeepSeek with -inf
                b.copy_(0.3 * torch.randn_like(b).abs())
        if model_type == "gpt_oss":
            perturb_gpt_oss(model)
    return model.eval()


@torch.no_grad()
def greedy(model, ids, device):
    """HF greedy decoding with its KV cache: tokens and the logits at LOGIT_STEPS."""
    x = torch.tensor([ids], device=device)
    out = model(input_ids=x, use_cache=True)
    past, tokens, logits = out.past_key_values, [], []
    last = out.logits[0, -1].float()
    for step in range(STEPS):
        if step in LOGIT_STEPS:
            logits.append(last.cpu())
        tok = int(torch.argmax(last))
        tokens.append(tok)
        if step + 1 == STEPS:
            break
        pos = torch.tensor([[len(ids) + step]], device=device)
        out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past, position_ids=pos,
                    use_cache=True)
        past, last = out.past_key_values, out.logits[0, -1].float()
    return tokens, logits


def encode_prompts(tok_dir):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    return [[1] + tok.encode(p, add_special_tokens=False).ids for p in PROMPTS]


def cmd_fixtures(out_dir, tok_dir, only=None):
    prompts = encode_prompts(tok_dir)
    assert len(prompts[1]) > WINDOW, f"the long prompt has {len(prompts[1])} tokens, the window is {WINDOW}"
    report = {}
    moe = moe_families()
    for name, (mt, extra) in {**families(), **moe, **gpt_oss_families()}.items():
        if only and name not in only:
            continue
        try:
            model = build(mt, extra)
            d = os.path.join(out_dir, name)
            reload = None
            if name in moe:
                reload = save_hub_format(model, mt, extra, d, prompts[0])
                hub_config(d, mt, extra)
                print(name, reload, flush=True)
            else:
                model.save_pretrained(d, safe_serialization=True)
            if mt == "gpt_oss":
                from safetensors import safe_open
                with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
                    reload = {k: list(f.get_slice(k).get_shape()) for k in f.keys() if "layers.0." in k}
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(tok_dir, f), d)
            res = dict(prompts=prompts, steps=STEPS, logit_steps=LOGIT_STEPS, tokens=[], logits=[])
            for p in prompts:
                t, l = greedy(model, p, "cpu")
                res["tokens"].append(t)
                res["logits"].append([[float(f"{v:.7g}") for v in row.tolist()] for row in l])
            with open(os.path.join(d, "hf_greedy.json"), "w") as f:
                json.dump(res, f, separators=(",", ":"))
            report[name] = dict(ok=True, prompt_lens=[len(p) for p in prompts], tokens=res["tokens"])
            if reload:
                report[name]["hub_format"] = reload
            print(name, "ok", res["tokens"][0][:12], flush=True)
        except Exception as e:  # one family's failure must not hide the others'
            report[name] = dict(ok=False, error=repr(e))
            print(name, "FAILED", repr(e), flush=True)
    return report


@torch.no_grad()
def cmd_bf16(fix_dir, out_json):
    """HF itself in bf16 on the GPU against its f32 fixtures, measured as graphserve's GPU test
    (tests/cuda/families_bf16_test.cpp) measures itself: one forward over prompt + HF's f32
    tokens, teacher-forced greedy agreement, and logits rel-L2 at the kept steps."""
    res = {}
    for name in sorted(os.listdir(fix_dir)):
        d = os.path.join(fix_dir, name)
        if not os.path.exists(os.path.join(d, "hf_greedy.json")):
            continue
        ref = json.load(open(os.path.join(d, "hf_greedy.json")))
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16, attn_implementation="eager").cuda()
        agree, total, rels = 0, 0, []
        for p, toks, kept in zip(ref["prompts"], ref["tokens"], ref["logits"]):
            seq = torch.tensor([p + toks[:-1]], device="cuda")
            logits = model(input_ids=seq).logits[0].float()
            for s_, tok in enumerate(toks):
                row = logits[len(p) - 1 + s_]
                agree += int(torch.argmax(row)) == tok
                total += 1
                if s_ in ref["logit_steps"]:
                    r = torch.tensor(kept[ref["logit_steps"].index(s_)], device="cuda")
                    rels.append(float(torch.linalg.norm(row - r) / torch.linalg.norm(r)))
        res[name] = dict(agree=agree, total=total, rel_l2_mean=sum(rels) / len(rels), rel_l2_max=max(rels))
        print(f"[hf-bf16] {name:12s} teacher-forced greedy agreement {agree}/{total}, logits rel-L2 mean "
              f"{res[name]['rel_l2_mean']:.4f} max {res[name]['rel_l2_max']:.4f}", flush=True)
    json.dump(res, open(out_json, "w"), indent=1)


PEER_SHAPES = {
    "phi3-mini": ("phi3", dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                               num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                               sliding_window=2047, pad_token_id=0)),
    "gemma2-2b": ("gemma2", dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                                 num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                                 query_pre_attn_scalar=256, sliding_window=4096, attn_logit_softcapping=50.0,
                                 final_logit_softcapping=30.0, tie_word_embeddings=True, pad_token_id=0)),
    "qwen3-30b-a3b": ("qwen3_moe", dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                        num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4,
                                        head_dim=128, num_experts=128, num_experts_per_tok=8,
                                        moe_intermediate_size=768, norm_topk_prob=True, pad_token_id=0)),
    "mixtral-8x7b": ("mixtral", dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                                     num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                     num_local_experts=8, num_experts_per_tok=2, pad_token_id=0)),
    "deepseek-v2-lite": ("deepseek_v2", dict(vocab_size=102400, hidden_size=2048, intermediate_size=10944,
                                             num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16,
                                             kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128,
                                             qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=64,
                                             n_shared_experts=2, num_experts_per_tok=6, moe_intermediate_size=1408,
                                             first_k_dense_replace=1, topk_method="greedy", n_group=None,
                                             topk_group=None, routed_scaling_factor=1.0, norm_topk_prob=False,
                                             max_position_embeddings=163840, pad_token_id=0,
                                             rope_parameters=rope("yarn", factor=40.0,
                                                                  original_max_position_embeddings=4096,
                                                                  beta_fast=32.0, beta_slow=1.0, mscale=0.707,
                                                                  mscale_all_dim=0.707))),
}


@torch.no_grad()
def cmd_peer(out_json, names=None, prompt=128, steps=32, warm=4):
    """HF eager decode ms per step (bf16, DynamicCache) for the real shapes at bs 1 and 32
    (MoE shapes: 1, 32 and 128, fewer steps)."""
    res = {}
    for name, (mt, kw) in PEER_SHAPES.items():
        if names and name not in names:
            continue
        moe = "num_experts_per_tok" in kw
        if moe:
            steps, warm = 8, 2
        cfg = AutoConfig.for_model(mt, **kw)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
        for bs in (1, 32, 128) if moe else (1, 32):
            x = torch.randint(3, 1000, (bs, prompt), device="cuda")
            out = model(input_ids=x, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            times = []
            for i in range(warm + steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = model(input_ids=tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                torch.cuda.synchronize()
                if i >= warm:
                    times.append(time.perf_counter() - t0)
            times.sort()
            res[f"{name}_bs{bs}"] = dict(hf_eager_ms_median=1000 * times[len(times) // 2])
            print(name, bs, res[f"{name}_bs{bs}"], flush=True)
        del model
        torch.cuda.empty_cache()
    json.dump(res, open(out_json, "w"), indent=1)


@torch.no_grad()
def cmd_peer_prefill(out_json, names, lens, reps=5, warm=2):
    """HF prefill ms of one prompt of each length (bf16, SDPA, random weights of the real shapes):
    the median of model(ids, use_cache=False, logits_to_keep=1), CUDA-event timed, the peer of
    `graphserve bench latency --batch-size 1 --input-len N --max-num-batched-tokens N`."""
    res = {}
    for name in names:
        mt, kw = PEER_SHAPES[name]
        cfg = AutoConfig.for_model(mt, **kw)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
        for n in lens:
            ids = torch.randint(3, 1000, (1, n), device="cuda")
            times = []
            for i in range(warm + reps):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                model(input_ids=ids, use_cache=False, logits_to_keep=1)
                b.record()
                torch.cuda.synchronize()
                if i >= warm:
                    times.append(a.elapsed_time(b))
            times.sort()
            res[f"{name}_prefill{n}"] = dict(hf_sdpa_prefill_ms_median=times[len(times) // 2])
            print(name, n, res[f"{name}_prefill{n}"], flush=True)
        del model
        torch.cuda.empty_cache()
    json.dump(res, open(out_json, "w"), indent=1)


from fp8_fixtures import cmd_fp8  # noqa: E402  (FP8 checkpoint layouts of the same models)


def main(argv):
    if len(argv) >= 3 and argv[1] == "fixtures":
        tok = argv[argv.index("--tokenizer") + 1]
        only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
        report = cmd_fixtures(argv[2], tok, only)
        json.dump(report, open(os.path.join(argv[2], "report.json"), "w"), indent=1)
        return 0 if all(r["ok"] for r in report.values()) else 1
    if len(argv) >= 3 and argv[1] == "fp8":
        tok = argv[argv.index("--tokenizer") + 1]
        report = cmd_fp8(argv[2], tok, sys.modules[__name__])
        json.dump(report, open(os.path.join(argv[2], "report_fp8.json"), "w"), indent=1)
        return 0 if all(r["ok"] for r in report.values()) else 1
    if len(argv) == 4 and argv[1] == "bf16":
        cmd_bf16(argv[2], argv[3])
        return 0
    if len(argv) in (3, 4) and argv[1] == "peer":
        cmd_peer(argv[2], argv[3].split(",") if len(argv) == 4 else None)
        return 0
    if len(argv) == 5 and argv[1] == "peer-prefill":
        cmd_peer_prefill(argv[2], argv[3].split(","), [int(x) for x in argv[4].split(",")])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
