"""Benchmark 3, emulated device overhead: µs per call on the emulated ``neuron`` device vs the CPU.

Three calls, each timed on CPU tensors and on ``neuron`` tensors of the same values (best of
``--repeat`` runs of ``--number`` calls, :mod:`timeit`): a small elementwise op (``torch.add`` of two
64-element float32 tensors), a view op (``Tensor.transpose(0, 1)`` of an 8x8 tensor) and a matmul
(``torch.matmul`` of two 64x64 float32 matrices). Every emulated call goes through the boxed
PrivateUse1 fallback (``emulator/fallback.py``), so the difference is the emulator's Python
cost per call. Prints µs per call and the ratio neuron / CPU, the largest ratio last.

Usage: ``python -m benchmarks.emulator_overhead [--number N] [--repeat R] [--profile]``
"""

from __future__ import annotations

import argparse
import sys
import timeit

from . import _common as c


def _cases(torch):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, generator=g), torch.randn(64, generator=g)
    v = torch.randn(8, 8, generator=g)
    m1, m2 = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    return [
        ("add (64 elements)", lambda x, y: torch.add(x, y), (a, b)),
        ("transpose view (8x8)", lambda x: x.transpose(0, 1), (v,)),
        ("matmul (64x64 @ 64x64)", lambda x, y: torch.matmul(x, y), (m1, m2)),
    ]


def per_call_us(fn, args, number: int, repeat: int) -> float:
    """Best-of-``repeat`` time of one call of ``fn(*args)`` in microseconds (after 50 warm-up calls)."""
    for _ in range(50):
        fn(*args)
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number * 1e6


def run(number: int = 2000, repeat: int = 5) -> dict:
    """Measure; return the result record (also appended to ``results/emulator.jsonl``)."""
    import torch

    import neuron_conformance.emulator.backend  # noqa: F401 - registers the emulated neuron device

    rows = []
    for name, fn, args in _cases(torch):
        dev_args = tuple(x.to("neuron") for x in args)
        cpu_us = per_call_us(fn, args, number, repeat)
        dev_us = per_call_us(fn, dev_args, number, repeat)
        rows.append(
            {
                "case": name,
                "cpu_us": round(cpu_us, 2),
                "neuron_us": round(dev_us, 2),
                "ratio": round(dev_us / cpu_us, 2),
                "extra_us": round(dev_us - cpu_us, 2),
            }
        )
    record = {
        "what": f"best of {repeat} x {number} calls",
        "cases": rows,
        "max_ratio": max(r["ratio"] for r in rows),
        "max_extra_us": max(r["extra_us"] for r in rows),
    }
    c.write_result("emulator", record)
    return record


def profile(number: int = 20000) -> None:
    """Print the cProfile of ``number`` emulated ``torch.add`` calls (where the per-call cost goes)."""
    import cProfile
    import pstats

    import torch

    import neuron_conformance.emulator.backend  # noqa: F401

    a, b = torch.randn(64).to("neuron"), torch.randn(64).to("neuron")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(number):
        torch.add(a, b)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=2000, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=5, help="timing runs (the best is kept)")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of emulated adds")
    args = ap.parse_args(argv)
    if args.number < 1 or args.repeat < 1:
        ap.error("--number and --repeat must be >= 1")
    r = run(args.number, args.repeat)
    if args.profile:
        profile()
    print(f"measured: {r['what']}")
    for row in r["cases"]:
        print(
            f"{row['case']:<24} cpu {row['cpu_us']:8.2f} µs  neuron {row['neuron_us']:8.2f} µs  "
            f"(+{row['extra_us']:.2f} µs)  {row['ratio']:.2f}x"
        )
    print(f"emulated device overhead: worst neuron / CPU = {r['max_ratio']:.2f}x per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
