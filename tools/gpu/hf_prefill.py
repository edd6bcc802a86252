"""HF transformers prefill time (SDPA attention, bf16, random weights) on graphserve's preset shapes,
as the peer of `graphserve bench latency --batch-size 1 --input-len N`: the median over timed calls
of model(ids, use_cache=False, logits_to_keep=1), CUDA-event timed after warm-up.

Usage (on the GPU machine, with ../shared/tools/hf_peer.py copied beside this file: its SHAPES table
is read without running it):
    python3 hf_prefill.py llama3.2-1b 128,512,2048,8192
Prints one line per length and writes hf_prefill.jsonl into $OUT (or the current folder).
"""
import ast, json, os, sys
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config


def load_shapes():
    """hf_peer.py's SHAPES dict (the module runs its benchmark when imported, so evaluate just that)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_peer.py")
    tree = ast.parse(open(path).read())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SHAPES")
    return eval(compile(ast.Expression(node.value), path, "eval"),
                {"LlamaConfig": LlamaConfig, "Qwen2Config": Qwen2Config, "dict": dict})


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "llama3.2-1b"
    lens = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "128,512,2048,8192").split(",")]
    C, kw = load_shapes()[name]
    cfg = C(**kw)
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    m.eval()
    out = open(os.path.join(os.environ.get("OUT", "."), "hf_prefill.jsonl"), "a")
    for n in lens:
        ids = torch.randint(0, cfg.vocab_size, (1, n), device="cuda")
        times = []
        with torch.no_grad():
            for i in range(13):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                m(ids, use_cache=False, logits_to_keep=1)
                b.record()
                torch.cuda.synchronize()
                if i >= 3:
                    times.append(a.elapsed_time(b))
        times.sort()
        ms = times[len(times) // 2]
        print(f"hf sdpa {name} prefill {n}: {ms:.3f} ms", flush=True)
        row = {"model": name, "input_len": n, "prefill_ms": ms, "attn": m.config._attn_implementation}
        out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
