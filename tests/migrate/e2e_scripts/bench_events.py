"""Benchmark timing loop with CUDA events, written for CUDA."""
import json
import sys

import torch
from torch.cuda import Event


def bench(fn, warmup=2, iters=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = Event(True), Event(True)  # positional enable_timing
    start.record()
    for _ in range(iters):
        out = fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters, out


def main():
    torch.manual_seed(0)
    a = torch.randn(128, 128, device="cuda")
    b = torch.randn(128, 128, device="cuda:0")
    ms, out = bench(lambda: a @ b)
    json.dump({"device": out.device.type, "ms": ms, "checksum": out.sum().item()}, sys.stdout)


if __name__ == "__main__":
    main()
