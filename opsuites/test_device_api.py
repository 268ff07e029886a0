"""The device API around the ops: ``torch.accelerator``, streams/events, memory statistics, RNG,
serialization, pinned non-blocking copies, a growing ``Tensor.resize_``, autocast, ``torch.compile`` and
``torch.profiler`` (:mod:`neuron_conformance.opsuites.profiler_checks`).

Each test records ``kind="api"`` with ``op`` naming the checked API (``accelerator.streams``, ...), so the
manifest can list what a backend does not support. An API the device lacks raises ``NotImplementedError``
(class ``unsupported``); a profiler the device API probe found ``missing`` skips the profiler checks (the
device API table shows it ``missing``). Statistical tests use a fixed seed and a significance level of 1e-4, so they
are deterministic for a given seed and fail a correct device rarely.

Sources: ``Tensor.resize_`` keeps the existing elements when it grows the storage ("Existing elements are
preserved but any new memory is uninitialized", https://pytorch.org/docs/stable/generated/torch.Tensor.resize_.html);
the Kolmogorov-Smirnov critical value ``sqrt(-ln(alpha/2)/2)/sqrt(n)`` (asymptotic, one
sample); the autocast policy is the CUDA op lists of PyTorch's AMP documentation
(https://pytorch.org/docs/stable/amp.html, "CUDA Ops that can autocast to float16" / "to float32").
"""

from __future__ import annotations

import io
import math

import pytest
import torch

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.oracle import check
from neuron_conformance.opsuites.profiler_checks import (
    check_chrome_trace,
    check_device_activity,
    check_nesting,
    check_op_events,
    device_activity_supported,
    profile_workload,
)

SUITE = "device_api"
ALPHA = 1e-4


def _cpu_randn(*shape, seed: int = 0) -> torch.Tensor:
    """Standard normal values drawn on the CPU from a generator of its own (inputs of the autocast and
    compile checks): building them does not depend on the device's RNG, so a backend without RNG
    serialization still has its autocast and compile checked."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _api(name):
    return pytest.mark.conformance(op=name, suite=SUITE, kind="api", variant="api")


def _need_accelerator(device):
    if device.type == "cpu":
        pytest.skip("the CPU is not an accelerator: torch.accelerator checks need a device")


@_api("accelerator.devices")
def test_accelerator_devices(device):
    _need_accelerator(device)
    if not torch.accelerator.is_available():
        raise MetadataFailure("torch.accelerator.is_available() is False")
    acc = torch.accelerator.current_accelerator()
    if acc is None or acc.type != device.type:
        raise MetadataFailure(f"current_accelerator() is {acc}, expected {device.type}")
    n = torch.accelerator.device_count()
    if n < 1:
        raise MetadataFailure(f"device_count() is {n}")
    for i in range(n):
        torch.accelerator.set_device_index(i)
        if torch.accelerator.current_device_index() != i:
            raise MetadataFailure(
                f"set_device_index({i}) then current_device_index() gave {torch.accelerator.current_device_index()}"
            )
        if torch.empty(1, device=device.type).device.index != i:
            raise MetadataFailure(f"a tensor made after set_device_index({i}) is not on device {i}")
    torch.accelerator.set_device_index(0)
    torch.accelerator.synchronize()


@_api("accelerator.streams")
@pytest.mark.capability("streams", "events")
def test_streams_and_events(device):
    _need_accelerator(device)
    s = torch.Stream(device=device.type)
    cur = torch.accelerator.current_stream()
    if cur.device.type != device.type:
        raise MetadataFailure(f"current_stream() is on {cur.device}")
    start, end = (
        torch.Event(device=device.type, enable_timing=True),
        torch.Event(device=device.type, enable_timing=True),
    )
    start.record(cur)
    x = torch.randn(64, 64, device=device) @ torch.randn(64, 64, device=device)
    end.record(cur)
    s.wait_event(end)
    s.wait_stream(cur)
    end.synchronize()
    if not end.query() or not s.query():
        raise MetadataFailure("an event/stream is not complete after synchronize()")
    ms = start.elapsed_time(end)
    if not (isinstance(ms, float) and ms >= 0 and math.isfinite(ms)):
        raise NumericFailure(f"elapsed_time gave {ms!r}, expected a finite non-negative float (ms)")
    torch.accelerator.synchronize()
    if x.shape != (64, 64):
        raise MetadataFailure("matmul under events gave the wrong shape")


@_api("accelerator.memory")
def test_memory_statistics(device):
    _need_accelerator(device)
    torch.accelerator.synchronize()
    before = torch.accelerator.memory_allocated()
    x = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    during = torch.accelerator.memory_allocated()
    peak = torch.accelerator.max_memory_allocated()
    del x
    after = torch.accelerator.memory_allocated()
    if during - before < (1 << 20):
        raise MetadataFailure(f"memory_allocated grew by {during - before} bytes for a 1 MiB tensor")
    if after >= during:
        raise MetadataFailure(f"memory_allocated did not drop after freeing (during {during}, after {after})")
    if peak < during:
        raise MetadataFailure(f"max_memory_allocated {peak} < memory_allocated {during}")
    stats = torch.accelerator.memory_stats()
    if not isinstance(stats, dict):
        raise MetadataFailure(f"memory_stats() gave {type(stats).__name__}, expected a dict")


@_api("rng.seed")
def test_rng_same_seed_same_values(device):
    torch.manual_seed(1234)
    a = torch.rand(100, device=device)
    torch.manual_seed(1234)
    b = torch.rand(100, device=device)
    if not torch.equal(a.cpu(), b.cpu()):
        raise NumericFailure("the same seed gave different rand values on the device")
    # the device stream is independent of the CPU's: drawing on the device does not move the CPU generator
    if device.type != "cpu":
        torch.manual_seed(7)
        c1 = torch.rand(5)
        torch.manual_seed(7)
        torch.rand(1000, device=device)
        c2 = torch.rand(5)
        if not torch.equal(c1, c2):
            raise NumericFailure("drawing on the device advanced the CPU generator")
        n = torch.accelerator.device_count()
        if n >= 2:
            mod = torch.get_device_module(device.type)
            torch.manual_seed(9)
            d1 = torch.rand(5, device=f"{device.type}:1")
            torch.manual_seed(9)
            with torch.device(f"{device.type}:0"):
                mod.manual_seed(99)
            d2 = torch.rand(5, device=f"{device.type}:1")
            if not torch.equal(d1.cpu(), d2.cpu()):
                raise NumericFailure("seeding device 0 changed the stream of device 1")


def _ks(sample: torch.Tensor, cdf) -> float:
    x, _ = torch.sort(sample.double().cpu())
    n = x.numel()
    f = cdf(x)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return float(torch.maximum(i / n - f, f - (i - 1) / n).max())


def _ks_check(name, sample, cdf):
    d = _ks(sample, cdf)
    crit = math.sqrt(-math.log(ALPHA / 2) / 2) / math.sqrt(sample.numel())
    if d > crit:
        raise NumericFailure(
            f"{name}: Kolmogorov-Smirnov statistic {d:.4f} > critical {crit:.4f} (alpha {ALPHA})",
            fields={"rule": "ks", "max_abs": d, "atol": crit, "rtol": 0.0},
        )


@_api("rng.distributions")
def test_distributions(device):
    torch.manual_seed(0)
    n = 20000
    _ks_check("rand vs U(0,1)", torch.rand(n, device=device), lambda x: x.clamp(0, 1))
    _ks_check("randn vs N(0,1)", torch.randn(n, device=device), lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))))
    p = 0.3
    b = torch.bernoulli(torch.full((n,), p, device=device)).cpu()
    z = (float(b.mean()) - p) / math.sqrt(p * (1 - p) / n)
    if abs(z) > 3.9:  # two-sided alpha 1e-4
        raise NumericFailure(
            f"bernoulli(p={p}): mean {float(b.mean()):.4f}, z = {z:.2f}",
            fields={"rule": "z-test", "max_abs": abs(z), "atol": 3.9, "rtol": 0.0},
        )
    if not bool(((b == 0) | (b == 1)).all()):
        raise NumericFailure("bernoulli produced values other than 0 and 1")
    q = 0.25
    d = torch.nn.functional.dropout(torch.ones(n, device=device), p=q, training=True).cpu()
    kept = d != 0
    z = (float((~kept).double().mean()) - q) / math.sqrt(q * (1 - q) / n)
    if abs(z) > 3.9:
        raise NumericFailure(
            f"dropout(p={q}): zero fraction {float((~kept).double().mean()):.4f}, z = {z:.2f}",
            fields={"rule": "z-test", "max_abs": abs(z), "atol": 3.9, "rtol": 0.0},
        )
    if not torch.allclose(d[kept], torch.full_like(d[kept], 1 / (1 - q))):
        raise NumericFailure("dropout: kept elements are not scaled by 1/(1-p)")


@_api("rng.state")
def test_rng_state_round_trip(device):
    """The device module's ``set_rng_state(get_rng_state())`` replays the device's random values. The op
    suites freeze the device RNG state around random ops only where this works
    (:func:`neuron_conformance.conformance.pytest_plugin.seeding.frozen_rng_state`), so a backend without it
    fails here, once, and not on every random op."""
    _need_accelerator(device)
    module = torch.get_device_module(device.type)
    missing = [name for name in ("get_rng_state", "set_rng_state") if not callable(getattr(module, name, None))]
    if missing:
        raise NotImplementedError(f"torch.{device.type} has no {' and no '.join(missing)}")
    torch.manual_seed(3)
    state = module.get_rng_state()
    first = torch.rand(64, device=device).cpu()
    module.set_rng_state(state)
    again = torch.rand(64, device=device).cpu()
    if not torch.equal(first, again):
        raise NumericFailure("set_rng_state(get_rng_state()) did not replay the device's random values")


@_api("serialization")
def test_serialization_round_trip(device):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(device)
    obj = {
        "w": torch.randn(3, 5, device=device)[:, 1:4],
        "state": model.state_dict(),
        "i": torch.arange(6, device=device),
    }
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    back = torch.load(buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    for key in ("w", "i"):
        if back[key].device.type != device.type:
            raise MetadataFailure(f"{key} came back on {back[key].device}")
        if not torch.equal(back[key].cpu(), obj[key].cpu()) or not torch.equal(on_cpu[key], obj[key].cpu()):
            raise NumericFailure(f"{key} changed in the round trip")
        if back[key].stride() != obj[key].stride():
            raise MetadataFailure(f"{key}: strides {back[key].stride()} after loading, {obj[key].stride()} before")
    for k, v in model.state_dict().items():
        if not torch.equal(back["state"][k].cpu(), v.cpu()):
            raise NumericFailure(f"state_dict[{k}] changed in the round trip")


@_api("pin_memory")
@pytest.mark.capability("pinned_memory")
def test_pinned_non_blocking_copies(device):
    _need_accelerator(device)
    src = torch.randn(1000, 33).pin_memory()
    if not src.is_pinned():
        raise MetadataFailure("pin_memory() returned an unpinned tensor")
    dev = src.to(device, non_blocking=True)
    back = torch.empty_like(src).pin_memory()
    back.copy_(dev, non_blocking=True)
    torch.accelerator.synchronize()
    if not torch.equal(dev.cpu(), src) or not torch.equal(back, src):
        raise NumericFailure("a non-blocking copy through pinned memory did not land intact")


@_api("tensor.resize_")
def test_growing_resize_keeps_elements(device):
    """``resize_`` to more elements than the storage holds keeps the old elements, in order, at the front
    (documented semantics, module docstring), for a 1-d tensor and a 2-d view; checked on the CPU too,
    so the expectation is PyTorch's behaviour, not only its documentation."""
    src = torch.arange(1, 7, dtype=torch.float32)
    cases = [
        ("contiguous (6,) -> (4, 5)", lambda t: t, (4, 5), src),
        ("contiguous (2, 3) -> (3, 7)", lambda t: t.view(2, 3), (3, 7), src),
    ]
    for what, shape_of, new_shape, expected in cases:
        for where in ("cpu", device):
            t = shape_of(src.clone().to(where))
            t.resize_(*new_shape)
            if tuple(t.shape) != new_shape or not t.is_contiguous():
                raise MetadataFailure(
                    f"resize_ {what} on {where}: shape {tuple(t.shape)}, contiguous "
                    f"{t.is_contiguous()}; expected {new_shape}, contiguous"
                )
            kept = t.reshape(-1)[: expected.numel()].cpu()
            if not torch.equal(kept, expected):
                raise NumericFailure(
                    f"resize_ {what} on {where} lost the existing elements: "
                    f"{kept.tolist()} instead of {expected.tolist()}",
                    fields={"rule": "exact", "max_abs": float((kept - expected).abs().max()), "atol": 0.0, "rtol": 0.0},
                )


# (op, callable on fp32 inputs, expected dtype: "low" = the autocast dtype, or a torch.dtype)
_AUTOCAST = [
    ("mm", lambda a, b: torch.mm(a, b), "low"),
    ("matmul", lambda a, b: a @ b, "low"),
    ("linear", lambda a, b: torch.nn.functional.linear(a, b), "low"),
    ("addmm", lambda a, b: torch.addmm(a, a, b), "low"),
    ("bmm", lambda a, b: torch.bmm(a[None], b[None]), "low"),
    ("softmax", lambda a, b: torch.softmax(torch.mm(a, b), dim=-1), torch.float32),
    ("log_softmax", lambda a, b: torch.log_softmax(torch.mm(a, b), dim=-1), torch.float32),
    ("layer_norm", lambda a, b: torch.nn.functional.layer_norm(torch.mm(a, b), (4,)), torch.float32),
    ("sum", lambda a, b: torch.sum(torch.mm(a, b)), torch.float32),
    ("mse_loss", lambda a, b: torch.nn.functional.mse_loss(torch.mm(a, b), a), torch.float32),
    ("cat (promote)", lambda a, b: torch.cat([torch.mm(a, b), a]), torch.float32),
]


@_api("autocast")
@pytest.mark.capability("autocast")
def test_autocast_policy(device):
    """Under ``torch.autocast(device.type)``, each op gives the dtype the CUDA policy gives."""
    _need_accelerator(device)
    low = torch.get_autocast_dtype(device.type)
    a = _cpu_randn(4, 4, seed=1).to(device)
    b = _cpu_randn(4, 4, seed=2).to(device)
    wrong = []
    with torch.autocast(device_type=device.type):
        for name, fn, want in _AUTOCAST:
            got = fn(a, b).dtype
            expected = low if want == "low" else want
            if got != expected:
                wrong.append(f"{name}: {got} (CUDA policy: {expected})")
    if wrong:
        raise MetadataFailure(f"autocast to {low} on {device.type}: " + "; ".join(wrong))


def _compile_cases():
    def f1(x, y):
        return torch.sin(x) * y + x.sum(dim=-1, keepdim=True)

    def f2(x, y):
        return torch.softmax(x @ y.T, dim=-1).relu()

    mod = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    return [("pointwise+reduction", f1), ("matmul+softmax", f2), ("mlp module", mod)]


def _check_compile(device, backend):
    import torch._dynamo

    with torch.random.fork_rng(devices=[]):  # the module's CPU init only: the device RNG is not touched
        torch.random.default_generator.manual_seed(0)
        cases = _compile_cases()
    for name, fn in cases:
        if isinstance(fn, torch.nn.Module):
            fn = fn.to(device)
        x, y = _cpu_randn(5, 8, seed=3).to(device), _cpu_randn(5, 8, seed=4).to(device)
        args = (x,) if isinstance(fn, torch.nn.Module) else (x, y)
        eager = fn(*args)
        torch._dynamo.reset()
        try:
            compiled = torch.compile(fn, backend=backend)(*args) if backend else torch.compile(fn)(*args)
        except torch._dynamo.exc.BackendCompilerFailed as exc:
            raise NotImplementedError(
                f"torch.compile ({backend or 'default backend'}) cannot compile for {device.type}: {exc}"
            ) from None
        check(compiled, eager, where=f"torch.compile {name} vs eager", atol=1e-5, rtol=1.3e-6)


@_api("compile.default")
@pytest.mark.capability("inductor")
def test_compile_default_backend(device):
    """``torch.compile`` with the default backend (inductor) matches eager on small functions and a module."""
    _check_compile(device, None)


@_api("compile.device_backend")
@pytest.mark.capability("compile")
def test_compile_device_backend(device, compile_backend):
    """``torch.compile(backend=NAME)``: ``--conformance-compile-backend NAME``, else the backend registered under the
    device type's name (the emulator registers one)."""
    from torch._dynamo import list_backends  # deferred: torch._dynamo costs about a second to import

    backend = compile_backend or device.type
    if backend not in list_backends(exclude_tags=()):
        pytest.skip(
            f"no torch.compile backend named {backend!r} is registered (--conformance-compile-backend NAME "
            f"names another)"
        )
    _check_compile(device, backend)


PROFILER = "torch.profiler"
"""The device API row of the profiler checks (the probe's name, :mod:`neuron_conformance.conformance.backend.probe` and the
emulated device's own API table)."""
PROFILER_DEVICE = "torch.profiler (ProfilerActivity.PrivateUse1)"
"""The device API row of the device-activity check."""


def _skip_if_missing(device_profile, name: str) -> None:
    """A device API the backend lacks (its probe said ``missing``) is reported ``missing`` in the device API
    table and its checks are skipped, not failed."""
    if (device_profile.api_support or {}).get(name) == "missing":
        pytest.skip(f"{name} is missing on {device_profile.type} (device API probe)")


def _profiled(device):
    x, y = _cpu_randn(16, 16, seed=5).to(device), _cpu_randn(16, 16, seed=6).to(device)
    return profile_workload(x, y)


@_api(PROFILER)
def test_profiler_records_device_ops(device, device_profile, conformance_record):
    """``torch.profiler.profile`` around ops on the device has an event for each, with device inputs."""
    _skip_if_missing(device_profile, PROFILER)
    counts = check_op_events(_profiled(device), device)
    conformance_record.update(rule="profiler-events", samples=sum(counts.values()))


@_api(PROFILER)
def test_profiler_chrome_trace(device, device_profile, tmp_path, conformance_record):
    """``export_chrome_trace`` writes JSON that parses and holds the device's op events."""
    _skip_if_missing(device_profile, PROFILER)
    n = check_chrome_trace(_profiled(device), tmp_path / "trace.json")
    conformance_record.update(rule="chrome-trace", samples=n)


@_api(PROFILER)
def test_profiler_ranges_nest(device, device_profile, conformance_record):
    """``record_function`` ranges nest: a child range, and the device ops in it, lie in the parent's span."""
    _skip_if_missing(device_profile, PROFILER)
    check_nesting(_profiled(device))
    conformance_record.update(rule="nested-ranges")


@_api(PROFILER_DEVICE)
def test_profiler_device_activity(device, device_profile, conformance_record):
    """Where the backend registers ``ProfilerActivity.PrivateUse1``, a profile with it has device events."""
    from torch.profiler import ProfilerActivity

    _need_accelerator(device)
    _skip_if_missing(device_profile, PROFILER_DEVICE)
    if not device_activity_supported():
        pytest.skip(f"ProfilerActivity.PrivateUse1 is not a supported profiler activity on {device.type}")
    x, y = _cpu_randn(16, 16, seed=5).to(device), _cpu_randn(16, 16, seed=6).to(device)
    prof = profile_workload(x, y, activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
    conformance_record.update(rule="device-activity", samples=check_device_activity(prof, device))
