"""A timing helper: CUDA events and synchronize on CUDA, perf_counter otherwise."""
import time

import torch


def timed(fn, iters=3):
    if torch.cuda.is_available():
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            out = fn()
        end.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(end) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        out = fn()
    return out, (time.perf_counter() - t0) * 1000 / iters


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.arange(16.0, device=dev).reshape(4, 4)
    out, ms = timed(lambda: a @ a)
    print("result", out.sum().item(), "ms is non-negative:", ms >= 0)


if __name__ == "__main__":
    main()
