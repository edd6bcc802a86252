"""HF transformers peer of `graphserve bench embed`: a random-weight Qwen3Model of the shape that
`graphserve info --preset NAME` printed, bf16, SDPA; one batch of BATCH x LEN random tokens, the
last token's final hidden state L2-normalised; median of 10 CUDA-event-timed batches after 3.

Usage: python3 hf_embed.py SHAPE_TXT BATCH LEN   (writes hf_embed.json into $OUT or .)
"""
import json, os, sys
import torch
import torch.nn.functional as F
from transformers import AutoModel, Qwen3Config


def shape(path):
    kv = {}
    for line in open(path):
        if ":" in line:
            k, v = line.split(":", 1)
            kv[k.strip()] = v.strip()
    return Qwen3Config(vocab_size=int(kv["vocab_size"]), hidden_size=int(kv["hidden_size"]),
                       intermediate_size=int(kv["intermediate_size"]), num_hidden_layers=int(kv["num_layers"]),
                       num_attention_heads=int(kv["num_heads"]), num_key_value_heads=int(kv["num_kv_heads"]),
                       head_dim=int(kv["head_dim"]), rms_norm_eps=float(kv["rms_norm_eps"]),
                       rope_theta=float(kv["rope_theta"]), max_position_embeddings=int(kv["max_position_embeddings"]))


def main():
    cfg = shape(sys.argv[1])
    batch, n = int(sys.argv[2]), int(sys.argv[3])
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = AutoModel.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    m.eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, n), device="cuda")
    times = []
    with torch.no_grad():
        for i in range(13):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            h = m(input_ids=ids).last_hidden_state
            e = F.normalize(h[:, -1].float(), dim=-1)
            b.record()
            torch.cuda.synchronize()
            if i >= 3:
                times.append(a.elapsed_time(b))
    times.sort()
    ms = times[len(times) // 2]
    print(f"hf sdpa qwen3 embed: batch {batch} x {n}: {ms:.2f} ms median, {batch / ms * 1e3:.1f} sequences/s, "
          f"{batch * n / ms * 1e3:.0f} tokens/s (norm {e.norm(dim=-1).mean().item():.3f})")
    with open(os.path.join(os.environ.get("OUT", "."), "hf_embed.json"), "w") as f:
        json.dump({"batch": batch, "input_len": n, "batch_ms_median": ms, "sequences_per_s": batch / ms * 1e3}, f)


if __name__ == "__main__":
    main()
