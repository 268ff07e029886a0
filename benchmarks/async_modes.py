"""Benchmark: the emulator's asynchronous mode against its synchronous one, per call and on a suite slice.

Two measurements, both in device mode (``--conformance-emulator-mode=device``, where the asynchronous mode is
compared in CI):

* **per call**: µs per call of three calls of :mod:`benchmarks.emulator_overhead` (``torch.add`` of two
  64-element float32 tensors, ``transpose`` of an 8x8 tensor, ``torch.matmul`` of two 64x64 float32
  matrices), ``--number`` calls then ``torch.accelerator.synchronize()``, best of ``--repeat``, with the
  asynchronous mode off and on (``neuron_conformance.emulator.set_async``). The asynchronous
  figure is what the host pays to issue a kernel plus the worker's share of the time (they share the GIL);
* **slice**: the wall and CPU seconds of one pytest run of ``--suite`` files and ``--conformance-ops`` ops
  with ``CONFORMANCE_EMULATOR_ASYNC=0`` and with ``=1`` (the same command otherwise, ``-n`` ``--workers``),
  the best of ``--rounds`` alternating runs each, and the ratio async / sync. ``--no-slice`` skips it.

Prints one line per case and the ratios; appends a JSON line to ``results/async_modes.jsonl``. On a shared
machine the CPU seconds are steadier than the wall seconds.

Usage: ``python -m benchmarks.async_modes [--number N] [--repeat R] [--suite FILE ...] [--ops A,B]
[--workers N] [--rounds R] [--no-slice]``
"""

from __future__ import annotations

import argparse
import sys
import timeit

from . import _common as c
from .emulator_overhead import _cases

DEFAULT_SUITES = (
    "opsuites/test_compare_cpu.py",
    "opsuites/test_variants.py",
    "opsuites/test_layouts.py",
    "opsuites/test_autograd.py",
    "opsuites/test_streams.py",
)
"""The slice's suites when ``--suite`` is not given."""

DEFAULT_OPS = "add,mul,sum,softmax,index_add,cumsum,matmul,nn.functional.layer_norm,where,cat"
"""The slice's ops when ``--ops`` is not given (elementwise, reductions, indexing, matmul, a norm)."""


def per_call_us(torch, fn, args, number: int, repeat: int) -> float:
    """Best-of-``repeat`` µs per call of ``fn(*args)``, each run ending with a device synchronize."""

    def batch():
        for _ in range(number):
            fn(*args)
        torch.accelerator.synchronize()

    batch()  # warm-up: plans, meta kernels and pooled blocks are cached after the first calls
    return min(timeit.repeat(batch, number=1, repeat=repeat)) / number * 1e6


def per_call(number: int, repeat: int) -> list[dict]:
    """``[{"case", "sync_us", "async_us", "ratio"}]`` for the three calls (module docstring)."""
    import torch

    import neuron_conformance.emulator as emu  # deferred: the slice runs need no torch here

    emu.install()  # the device in the mode this process would use anyway: it is given back at the end
    previous = emu.get_mode(), emu.is_async()
    emu.install("device")
    rows = []
    try:
        for name, fn, args in _cases(torch):
            dev_args = tuple(x.to("neuron") for x in args)
            emu.set_async(False)
            sync_us = per_call_us(torch, fn, dev_args, number, repeat)
            emu.set_async(True)
            async_us = per_call_us(torch, fn, dev_args, number, repeat)
            rows.append(
                {
                    "case": name,
                    "sync_us": round(sync_us, 2),
                    "async_us": round(async_us, 2),
                    "ratio": round(async_us / sync_us, 2),
                }
            )
    finally:
        emu.set_mode(previous[0])
        emu.set_async(previous[1])
    return rows


def slice_run(suites, ops: str, workers: int, timeout: float, rounds: int = 2) -> dict:
    """Wall and CPU seconds of the pytest slice in each execution mode (the best of ``rounds`` runs, the
    modes alternating so that both see the same warm caches and machine load), and their ratios."""
    out = {"suites": list(suites), "ops": ops, "workers": workers, "rounds": rounds}
    for _ in range(rounds):
        for value, key in (("0", "sync"), ("1", "async")):
            with c.tmpdir(f"async-{key}") as tmp:
                cmd = c.pytest_cmd(
                    *suites,
                    f"--conformance-ops={ops}",
                    "--conformance-emulator-mode=device",
                    f"--conformance-report-dir={tmp}",
                    "--conformance-no-report",
                    "-p",
                    "no:cacheprovider",
                    "-q",
                    "-n",
                    str(workers),
                )
                wall, proc = c.timed(cmd, timeout=timeout, extra_env={"CONFORMANCE_EMULATOR_ASYNC": value})
                c.check_rc(proc, f"the {key} slice")
            tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1:]
            best = out.get(key)
            if best is None or wall < best["wall_s"]:
                out[key] = {"wall_s": round(wall, 2), "cpu_s": proc.cpu_s, "summary": tail[0] if tail else ""}
    out["wall_ratio"] = round(out["async"]["wall_s"] / out["sync"]["wall_s"], 2)
    out["cpu_ratio"] = round(out["async"]["cpu_s"] / max(out["sync"]["cpu_s"], 1e-9), 2)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=500, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs (the best is kept)")
    ap.add_argument("--suite", action="append", help="a suite file of the slice (repeatable)")
    ap.add_argument("--ops", "--conformance-ops", default=DEFAULT_OPS, help="the slice's --conformance-ops")
    ap.add_argument("--workers", type=int, default=0, help="the slice's -n (0: one process)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds each slice run may take")
    ap.add_argument("--rounds", type=int, default=2, help="runs of the slice per mode, alternating (the best is kept)")
    ap.add_argument("--no-slice", action="store_true", help="measure the per-call costs only")
    args = ap.parse_args(argv)
    if args.number < 1 or args.repeat < 1 or args.rounds < 1 or args.workers < 0:
        ap.error("--number, --repeat and --rounds must be >= 1, --workers >= 0")
    record = {
        "what": f"device mode; per call: best of {args.repeat} x {args.number} calls + synchronize",
        "cases": per_call(args.number, args.repeat),
    }
    for row in record["cases"]:
        print(f"{row['case']:<24} sync {row['sync_us']:8.2f} µs  async {row['async_us']:8.2f} µs  {row['ratio']:.2f}x")
    if not args.no_slice:
        record["slice"] = s = slice_run(args.suite or DEFAULT_SUITES, args.ops, args.workers, args.timeout, args.rounds)
        print(f"slice ({len(s['suites'])} suites, ops {s['ops']}, -n {s['workers']}):")
        for key in ("sync", "async"):
            print(f"  {key:<5} {s[key]['wall_s']:8.1f} s wall  {s[key]['cpu_s']:8.1f} s CPU  {s[key]['summary']}")
        print(f"async / sync: {s['wall_ratio']:.2f}x wall, {s['cpu_ratio']:.2f}x CPU")
    c.write_result("async_modes", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
