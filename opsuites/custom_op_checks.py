"""The checks of the custom-op suite (``opsuites/test_custom_ops.py``), one function a check.

* :func:`run_opcheck`: ``torch.library.opcheck``'s four tests on device inputs (``test_schema``: the
  schema's mutation/aliasing claims under ``SchemaCheckMode``; ``test_faketensor``: the fake kernel's
  output metadata against the real kernel's; ``test_autograd_registration``; ``test_aot_dispatch_dynamic``:
  AOT autograd with dynamic shapes gives eager's outputs and gradients). torch 2.13's autograd-registration
  test refuses devices other than CPU/CUDA/XPU (``NotImplementedError``), so on a PrivateUse1 device the
  harness applies the same rule itself with the device's autograd key (:func:`check_autograd_registration`).
* :func:`forward_backward`: outputs, and gradients of the arguments declared ``grad`` for a fixed seeded
  cotangent, of a callable on given arguments.
* :func:`compare`: device results against the CPU reference's with the harness's oracle (tolerance and
  fp64 rule, :func:`neuron_conformance.conformance.verdict.compare.compare_outputs`).
* :func:`compile_backend_for`: the ``torch.compile`` backend the suite uses.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten

from neuron_conformance.conformance.backend.transfer import to_float64
from neuron_conformance.conformance.verdict.compare import compare_outputs
from neuron_conformance.conformance.verdict.failures import OPCHECK_CLASSES, OpcheckFailure
from neuron_conformance.conformance.verdict.tolerances import tolerance_for

NATIVE_AUTOGRAD_DEVICES = ("cpu", "cuda", "xpu")
"""Device types torch 2.13's ``autograd_registration_check`` handles itself."""


def to_device(args: tuple, device) -> tuple:
    """``args`` with every tensor copied to ``device`` as a leaf keeping ``requires_grad``."""
    return tuple(
        a.detach().to(device).requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args
    )


def check_autograd_registration(op: torch._ops.OpOverload, args: tuple, autograd_key: str) -> None:
    """``test_autograd_registration``'s rule for a device it refuses: ``op`` has a kernel at
    ``autograd_key`` (``"AutogradPrivateUse1"``), ``Autograd`` or ``CompositeImplicitAutograd``, or else no
    output of ``op(*args)`` that is not an input requires grad (torch/testing/_internal/optests/
    autograd_registration.py).

    Raises:
        OpcheckFailure: class ``opcheck-autograd``.
    """
    name = op.name()
    for key in (autograd_key, "Autograd", "CompositeImplicitAutograd"):
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            return
    ids = {id(a) for a in args}
    outs = [t for t in tree_flatten(op(*args))[0] if isinstance(t, torch.Tensor)]
    if any(t.requires_grad and id(t) not in ids for t in outs):
        raise OpcheckFailure(
            f"{name}: an output requires grad but the op has no kernel at {autograd_key}, "
            f"Autograd or CompositeImplicitAutograd (its gradient bypasses the op's formula)",
            check="test_autograd_registration",
        )


def run_opcheck(op: torch._ops.OpOverload, args: tuple, where: str) -> list[str]:
    """Run ``torch.library.opcheck``'s tests on device ``args``; the names of the tests that ran.

    Raises:
        OpcheckFailure: the first failing test (order of :data:`neuron_conformance.conformance.verdict.failures.OPCHECK_CLASSES`),
            with the class of that test and its exception's first line.
    """
    device_types = {a.device.type for a in args if isinstance(a, torch.Tensor)}
    native = device_types <= set(NATIVE_AUTOGRAD_DEVICES)
    tests = [t for t in OPCHECK_CLASSES if native or t != "test_autograd_registration"]
    results = torch.library.opcheck(op, args, test_utils=tests, raise_exception=False)
    for test in tests:
        result = results.get(test)
        if result != "SUCCESS":
            first = str(result).strip().splitlines()[0] if str(result).strip() else type(result).__name__
            raise OpcheckFailure(f"{where}: opcheck {test} failed: {type(result).__name__}: {first}", check=test)
    if not native:
        key = "AutogradPrivateUse1" if device_types == {torch._C._get_privateuse1_backend_name()} else None
        if key is None:
            raise OpcheckFailure(
                f"{where}: arguments on several devices {sorted(device_types)}", check="test_autograd_registration"
            )
        check_autograd_registration(op, args, key)
        tests.append("test_autograd_registration")
    return tests


def forward_backward(fn, args: tuple, seed: int, round_to: torch.dtype | None = None) -> tuple:
    """``(outputs, grads)``: ``fn(*args)`` and the gradients of the ``requires_grad`` tensors of ``args``
    for a cotangent drawn from ``seed`` on the CPU in float32 (the same on every device; rounded to
    ``round_to`` first when given, so a float64 run sees the cotangent a half-precision run sees);
    ``grads`` is ``()`` when no argument requires grad. Outputs and grads are detached."""
    out = fn(*args)
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if not wrt:
        return out.detach() if isinstance(out, torch.Tensor) else out, ()
    gen = torch.Generator().manual_seed(seed)
    cotangents = [
        torch.randn(t.shape, generator=gen, dtype=torch.float32).to(round_to or t.dtype).to(t.dtype).to(t.device)
        for t in outs
    ]
    grads = torch.autograd.grad(outs, wrt, cotangents, allow_unused=True)
    detached = tuple(o.detach() for o in outs)
    return detached[0] if len(detached) == 1 else detached, tuple(grads)


def reference_results(spec, cpu_args: tuple, seed: int, dtype: torch.dtype) -> tuple:
    """``(outputs, grads, outputs64, grads64)`` of the declared reference on ``cpu_args`` and on their
    float64 copies (the fp64 rule's reference; None when ``dtype`` is float64 itself)."""
    out, grads = forward_backward(spec.reference, cpu_args, seed)
    if dtype == torch.float64:
        return out, grads, None, None
    args64 = tuple(
        to_float64(a, dtype).detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in cpu_args
    )
    out64, grads64 = forward_backward(spec.reference, args64, seed, round_to=dtype)
    return out, grads, out64, grads64


def compare(actual, expected, reference64, dtype: torch.dtype, device_type: str, where: str) -> list:
    """Judge device ``actual`` against CPU ``expected`` (dtype, shape, device, values) with the tolerance of
    ``dtype``; the passing verdicts.

    The mirror rule (bitwise, :mod:`neuron_conformance.conformance.verdict.tolerances`) is not used even on a backend that mirrors
    the CPU: a custom kernel is compared with a separately written reference, not with the same kernel.

    Raises:
        MetadataFailure, NumericFailure, NonFiniteFailure: from :func:`neuron_conformance.conformance.verdict.compare.compare_outputs`.
    """
    tol = tolerance_for(dtype, mirrors_cpu=False, device_type=device_type)
    return compare_outputs(
        actual,
        expected,
        device_type=device_type,
        tolerance=tol,
        reference64=(lambda: reference64) if reference64 is not None else None,
        where=where,
    )


def compile_backend_for(device, option: str | None) -> str:
    """The ``torch.compile`` backend of the compile check: ``--conformance-compile-backend``, else the backend
    registered under the device type (the emulator registers ``neuron``), else ``inductor``."""
    if option:
        return option
    import torch._dynamo  # deferred: about a second to import; only the compile check needs it

    return device.type if device.type in torch._dynamo.list_backends(exclude_tags=()) else "inductor"
