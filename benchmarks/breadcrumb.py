"""Benchmark: the crash breadcrumb's cost: emulated ops per second traced with and without it.

A traced test counts every aten overload it runs on the device (:mod:`neuron_conformance.conformance.results.coverage`); with the
breadcrumb (:mod:`neuron_conformance.conformance.survival.breadcrumb`) each count also copies the overload's name into a 256-byte
``mmap``. This measures, for two small emulated ops (``torch.add`` of two 64-element float32 tensors,
``torch.neg`` of one) and both ways of tracing (the backend's op counter, the emulator's
``CONFORMANCE_COUNT_OPS``, and the ``TorchDispatchMode`` of ``--conformance-aten-coverage mode``), ops/s counting
into a plain dict and into a :class:`~neuron_conformance.conformance.survival.breadcrumb.CountingBreadcrumb`, side by side (best of
``--repeat`` rounds of ``--number`` calls, the two taking turns in each round, :mod:`timeit`), and the cost of one :meth:`Breadcrumb.enter`.

Usage: ``python -m benchmarks.breadcrumb [--number N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import timeit
from pathlib import Path

from . import _common as c


def _best_ops_per_s(fn, args, contexts: dict, number: int, repeat: int) -> dict:
    """Best-of-``repeat`` ops/s of ``fn(*args)`` inside each of ``contexts`` (name -> factory of a context
    manager), the contexts taking turns in every round so that a change of machine load hits them alike."""
    best = dict.fromkeys(contexts, float("inf"))
    for round_ in range(repeat + 1):  # round 0 warms up
        for name, make in contexts.items():
            with make():
                seconds = timeit.timeit(lambda: fn(*args), number=number if round_ else 50)
            if round_:
                best[name] = min(best[name], seconds)
    return {name: number / s for name, s in best.items()}


def run(number: int = 2000, repeat: int = 5) -> dict:
    """Measure; return the result record (also appended to ``results/breadcrumb.jsonl``)."""
    import torch

    import neuron_conformance.emulator.backend  # noqa: F401 - registers the emulated neuron device
    from neuron_conformance.conformance.results.coverage import CoverageMode  # deferred: see above

    # deferred: importing this module (python -m benchmarks lists it) must not install the device
    from neuron_conformance.conformance.survival.breadcrumb import Breadcrumb, CountingBreadcrumb  # deferred: see above
    from neuron_conformance.emulator.opcount import count_ops  # deferred: see above

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, generator=g).to("neuron"), torch.randn(64, generator=g).to("neuron")
    cases = [("add (64 elements)", lambda x, y: torch.add(x, y), (a, b)), ("neg (64 elements)", torch.neg, (a,))]
    tracers = {"backend counter": count_ops, "dispatch mode": lambda counts: CoverageMode("neuron", counts)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="crumb-bench-") as tmp:
        crumb = Breadcrumb(Path(tmp) / "bench.op")
        for tracer, make in tracers.items():
            for name, fn, args in cases:
                got = _best_ops_per_s(
                    fn,
                    args,
                    {"plain": lambda: make({}), "crumb": lambda: make(CountingBreadcrumb(crumb))},
                    number,
                    repeat,
                )
                plain, crumbed = got["plain"], got["crumb"]
                rows.append(
                    {
                        "tracer": tracer,
                        "case": name,
                        "plain_ops_s": round(plain),
                        "breadcrumb_ops_s": round(crumbed),
                        "ratio": round(plain / crumbed, 3),
                        "extra_us": round(1e6 / crumbed - 1e6 / plain, 2),
                    }
                )
        enter_ns = (
            min(timeit.repeat(lambda: crumb.enter("aten::add.Tensor"), number=100_000, repeat=repeat)) / 100_000 * 1e9
        )
        crumb.close()
    record = {
        "what": f"best of {repeat} x {number} calls",
        "cases": rows,
        "enter_ns": round(enter_ns, 1),
        "max_ratio": max(r["ratio"] for r in rows),
    }
    c.write_result("breadcrumb", record)
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=2000, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=5, help="timing runs (the best is kept)")
    args = ap.parse_args(argv)
    if args.number < 1 or args.repeat < 1:
        ap.error("--number and --repeat must be >= 1")
    r = run(args.number, args.repeat)
    print(f"measured: {r['what']}")
    for row in r["cases"]:
        print(
            f"{row['tracer']:<16} {row['case']:<18} plain {row['plain_ops_s']:>8} ops/s  breadcrumb "
            f"{row['breadcrumb_ops_s']:>8} ops/s  (+{row['extra_us']:.2f} µs/op)  {row['ratio']:.3f}x"
        )
    print(f"one Breadcrumb.enter: {r['enter_ns']:.0f} ns; worst plain / breadcrumb = {r['max_ratio']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
