#!/usr/bin/env python3
"""NCCL all-reduce latency per message size (bf16), one process per GPU, through PyTorch: the
reference for graphserve's all-reduce. Usage: tp_allreduce.py NGPUS"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20, 16 << 20]


def run(rank, world):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    for size in SIZES:
        x = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
        for _ in range(20):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(50):
                dist.all_reduce(x)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        torch.cuda.synchronize()
        start.record()
        for _ in range(4):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(end) * 1000 / 200
        if rank == 0:
            bw = 2 * (world - 1) / world * size / (us * 1e-6) / 1e9
            print(f"nccl all-reduce {size >> 10:6d} KiB: {us:8.1f} us in a graph, bus bandwidth {bw:7.1f} GB/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else torch.cuda.device_count()
    mp.spawn(run, args=(n,), nprocs=n)
