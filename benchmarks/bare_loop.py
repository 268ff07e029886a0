"""The baseline of the overhead benchmark: OpInfo samples run by a bare loop, no pytest, no harness.

For each op named on the command line and each of its CPU sample inputs in one dtype: move the inputs to
the device (``tensor.to(device)`` over the sample's nested arguments), call the op on the device and on
the CPU, and compare with ``torch.testing.assert_close`` (device not checked: the reference is on the
CPU). Exceptions of either call are counted, not raised. ``--inplace`` also runs the OpInfo's in-place
variant on fresh copies, which the harness's ``test_compare_cpu`` does too (like-for-like figure).
``--fast-samples`` draws the samples through ``neuron_conformance.opsuites.samples.sample_inputs`` (the same samples
without ``OpInfo.sample_inputs``' per-call stack inspection) and takes the OpInfos from
``neuron_conformance.opsuites.samples.op_db`` (random ops seeded without ``torch.manual_seed``'s lazy-seed stack
formatting), as the harness does, so that only the loop's own cost remains.

Prints one JSON object: ``seconds`` (whole process, from interpreter start), ``loop_s`` (the loop
alone), ``setup_s`` (imports: torch, the emulated device, the OpInfo database), ``ops``, ``samples``,
``calls``, ``mismatches``, ``errors``.

Usage: ``python -m benchmarks.bare_loop --conformance-ops @FILE [--dtype float32] [--conformance-device neuron] [--inplace]
[--fast-samples]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time

T0 = time.perf_counter()


def _names(spec: str) -> list[str]:
    if spec.startswith("@"):
        with open(spec[1:], encoding="utf-8") as fh:
            return [ln.split("#")[0].strip() for ln in fh if ln.split("#")[0].strip()]
    return [n.strip() for n in spec.split(",") if n.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", "--conformance-ops", required=True, help="comma-separated OpInfo full names, or @FILE")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument(
        "--device", "--conformance-device", default="neuron", help="device type (neuron: the emulated device)"
    )
    ap.add_argument("--inplace", action="store_true", help="also run the in-place variant of each sample")
    ap.add_argument(
        "--fast-samples",
        action="store_true",
        help="generate samples with neuron_conformance.opsuites.samples.sample_inputs, as the harness does",
    )
    args = ap.parse_args(argv)

    import torch
    from torch.utils._pytree import tree_map

    if args.device == "neuron":
        import neuron_conformance.emulator.backend  # noqa: F401 - registers the emulated device
    from torch.testing._internal.common_methods_invocations import op_db

    if args.fast_samples:
        # deferred: the bare loop times its own imports (setup_s), the harness's only when asked
        from neuron_conformance.opsuites.samples import op_db as harness_op_db
        from neuron_conformance.opsuites.samples import sample_inputs as _samples  # deferred: as above

        op_db = harness_op_db()  # the same OpInfos, with the harness's cheaper wrapper_set_seed
    else:

        def _samples(op, device, dtype):
            return op.sample_inputs(device, dtype)

    by_name = {op.full_name: op for op in op_db}
    names = _names(args.ops)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"--conformance-ops: unknown OpInfo name(s): {', '.join(unknown[:5])}")
    dtype = getattr(torch, args.dtype)
    device = torch.device(args.device)
    setup = time.perf_counter() - T0

    def to_dev(x):
        return x.detach().to(device) if isinstance(x, torch.Tensor) else x

    def cpu_copy(x):
        return x.detach().clone() if isinstance(x, torch.Tensor) else x

    counts = {"samples": 0, "calls": 0, "mismatches": 0, "errors": 0}

    def run_pair(fn, cpu_in, cpu_args, cpu_kwargs, dev_in, dev_args, dev_kwargs):
        counts["calls"] += 2
        try:
            expected = fn(cpu_in, *cpu_args, **cpu_kwargs)
        except Exception:  # noqa: BLE001 - errors are part of the workload
            expected = None
        try:
            actual = fn(dev_in, *dev_args, **dev_kwargs)
        except Exception:  # noqa: BLE001
            counts["errors"] += 1
            return
        if expected is None:
            return
        try:
            torch.testing.assert_close(actual, expected, check_device=False, equal_nan=True)
        except Exception:  # noqa: BLE001 - mismatches are counted, not raised
            counts["mismatches"] += 1

    start = time.perf_counter()
    for name in names:
        op = by_name[name]
        torch.manual_seed(0)
        for sample in _samples(op, "cpu", dtype):
            counts["samples"] += 1
            if args.inplace and op.inplace_variant is not None:
                pristine = tree_map(cpu_copy, (sample.input, sample.args, sample.kwargs))
            dev = tree_map(to_dev, (sample.input, sample.args, sample.kwargs))
            run_pair(op, sample.input, sample.args, sample.kwargs, *dev)
            if args.inplace and op.inplace_variant is not None:
                dev = tree_map(to_dev, pristine)
                run_pair(op.inplace_variant, *pristine, *dev)
    loop = time.perf_counter() - start
    print(
        json.dumps(
            {
                "seconds": round(time.perf_counter() - T0, 3),
                "loop_s": round(loop, 3),
                "setup_s": round(setup, 3),
                "ops": len(names),
                "dtype": args.dtype,
                "device": args.device,
                "inplace": args.inplace,
                "fast_samples": args.fast_samples,
                **counts,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
