"""The precision oracle: judge a device result against the CPU reference.

One function, :func:`judge`, decides every numeric comparison the harness makes (op suites and model
zoo) and reports how it decided, so the report can show the headroom of each op:

1. **Shape and dtype** must match (else ``metadata``).
2. **Non-finite positions**: NaN and ±inf must sit where the reference has them. A NaN or inf where the
   reference is finite fails as ``nonfinite`` in every dtype; a finite value where the reference is NaN
   or inf (a dropped NaN) fails as ``numeric``. Rule ``nonfinite-positions``.
3. **Exact** (integers, bool, exactly specified ops, backends that mirror CPU): every value and the sign
   of every zero must be equal. Rule ``exact``.
4. **Tolerance**: ``|a - e| <= atol + rtol * |e|`` elementwise (``torch.testing.assert_close``'s rule).
   Rule ``tolerance``.
5. **fp64 arbitration** (when a float64 reference is given and rule 4 failed): the device passes when
   its error against fp64 is within ``k`` times the CPU same-dtype error against fp64,
   ``RMSE(a - r64) <= k * RMSE(e - r64) + atol / 10``, and no element is further from fp64 than the
   ceiling ``max(CEILING * (atol + rtol * |r64|), k * max|e - r64|)``. Rule ``fp64``.

   Source: PyTorch's dynamo accuracy check ``torch._dynamo.utils.same`` (fp64 fallback; multiplier 3 for
   fp16/bf16, 2 otherwise; ``tol / 10`` slack). The ceiling is this project's: the RMSE bound alone would
   let a few elements of the device result be arbitrarily far off (a heavy tail hidden in the mean). Its
   first term is ten tolerances; its second, ``k`` times CPU's own largest error against fp64, takes over
   where it is larger, that is where CPU's rounding in this computation exceeds what the tolerance
   describes: a device is then held to the error CPU shows, not to a bar CPU fails too. Measured case: the gradient of an attention key bias (zero in exact arithmetic:
   softmax ignores a constant added to every key score) in a two-layer CLIP backward in bfloat16, where
   CPU's own error reaches 34 tolerances (model zoo, device mode).

Errors are always measured (pass or fail): largest absolute error, largest relative error (over nonzero
reference values) and largest distance in ULPs of the compared dtype, over positions finite in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import _disable_current_modes

from neuron_conformance.conformance.verdict.failures import (
    ConformanceFailure,
    MetadataFailure,
    NonFiniteFailure,
    NumericFailure,
    ReferenceSuspect,
)
from neuron_conformance.conformance.verdict.float8_formats import available_names, is_float8
from neuron_conformance.conformance.verdict.tolerances import default_tolerance, is_exact_dtype

CEILING = 10.0
"""Elementwise ceiling of the fp64 rule, in multiples of the dtype's ``atol + rtol * |r64|``."""


def arbitration_k(dtype: torch.dtype) -> float:
    """Multiplier ``k`` of the fp64 rule: 3 for float16/bfloat16, 2 otherwise (``torch._dynamo.utils.same``)."""
    return 3.0 if dtype in (torch.float16, torch.bfloat16) else 2.0


@dataclass
class Verdict:
    """The outcome of one comparison.

    Attributes:
        passed: whether the result is accepted.
        rule: the rule that decided (``exact``, ``tolerance``, ``fp64``, ``nonfinite-positions``,
            ``shape``, ``dtype``, ``value``).
        failure_class: ``None`` when passed, else ``numeric``, ``metadata`` or ``nonfinite``.
        max_abs: largest absolute error against the reference (finite positions), or None.
        max_rel: largest relative error (nonzero reference values), or None.
        max_ulp: largest distance in units in the last place of the dtype, or None for non-float.
        atol, rtol: tolerance used.
        message: a one-paragraph explanation (empty when passed).
    """

    passed: bool
    rule: str
    failure_class: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: float | None = None
    atol: float = 0.0
    rtol: float = 0.0
    message: str = ""
    extra: dict = field(default_factory=dict)

    def record_fields(self) -> dict:
        """The fields of a result record this verdict fills (see docs/architecture.md)."""
        return {
            "rule": self.rule,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "max_ulp": self.max_ulp,
            "atol": self.atol,
            "rtol": self.rtol,
        }

    def raise_if_failed(self, where: str = "") -> None:
        """Raise the :class:`~neuron_conformance.conformance.verdict.failures.ConformanceFailure` matching a failed verdict."""
        if self.passed:
            return
        prefix = f"{where}: " if where else ""
        if self.failure_class == REFERENCE_SUSPECT:
            raise ReferenceSuspect(prefix + self.message)
        cls = {"numeric": NumericFailure, "metadata": MetadataFailure, "nonfinite": NonFiniteFailure}.get(
            self.failure_class, ConformanceFailure
        )
        raise cls(prefix + self.message, verdict=self)


_INT_VIEW = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    # the signed float8 formats are sign-magnitude like the IEEE ones; float8_e8m0fnu has no sign
    # bit (a byte of exponent), so its values are ordered like its unsigned bytes
    **{getattr(torch, n): (torch.uint8 if n == "float8_e8m0fnu" else torch.int8) for n in available_names()},
}


def ulp_distance(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Elementwise distance in ULPs between two float tensors of the same dtype and shape.

    Both are mapped to integers ordered like the floats they encode (sign-magnitude to two's
    complement), so the distance counts the representable values between them; +0 and -0 are 0 apart.
    Returns a float64 tensor of the same shape. Non-float dtypes give ``|a - e|``.
    """
    dt = actual.dtype
    if dt not in _INT_VIEW:
        return (actual.double() - expected.double()).abs()
    idt = _INT_VIEW[dt]
    bits = torch.iinfo(idt).bits
    if not idt.is_signed:  # float8_e8m0fnu: bytes ordered like the values
        return (actual.contiguous().view(idt).double() - expected.contiguous().view(idt).double()).abs()

    def ordered(t: torch.Tensor) -> torch.Tensor:
        i = t.contiguous().view(idt).to(torch.int64)  # sign-extended
        mag = i & ((1 << (bits - 1)) - 1)  # magnitude bits of the narrow type
        return torch.where(i < 0, -mag, mag)

    oa, ob = ordered(actual), ordered(expected)
    same_sign = (oa >= 0) == (ob >= 0)
    # same sign: exact int64 difference; opposite signs: sum of magnitudes (cannot overflow in float64)
    return torch.where(same_sign, (oa - ob).abs().double(), oa.abs().double() + ob.abs().double())


def _as_real(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t


def _error_sizes(a: torch.Tensor, e: torch.Tensor, both_finite: torch.Tensor, narrow=None):
    """Largest absolute, relative and ULP errors over ``both_finite``; ``narrow``: the float8 tensors
    ``a`` and ``e`` were widened from, whose ULPs are counted (float8 kernels lack boolean indexing)."""
    if a.numel() == 0 or not bool(both_finite.any()):
        return 0.0, 0.0, (0.0 if a.is_floating_point() else None)
    a64, e64 = a.double()[both_finite], e.double()[both_finite]
    diff = (a64 - e64).abs()
    max_abs = float(diff.max())
    nz = e64 != 0
    max_rel = float((diff[nz] / e64[nz].abs()).max()) if bool(nz.any()) else 0.0
    if narrow is not None:
        return max_abs, max_rel, float(ulp_distance(*narrow)[both_finite].max())
    max_ulp = float(ulp_distance(a[both_finite], e[both_finite]).max()) if a.is_floating_point() else None
    return max_abs, max_rel, max_ulp


def _same_bits(a: torch.Tensor, e: torch.Tensor) -> bool:
    """True when ``a`` and ``e`` (real CPU tensors of one dtype and shape) hold the same bit patterns.

    Floats are compared through an integer view of the same width, so NaN equals the same NaN and -0.0
    differs from +0.0: exactly the cases where :func:`judge` would pass with every error at zero.
    Returns False for float dtypes without an integer view of their width (then the full path decides).
    """
    if a.is_floating_point():
        idt = _INT_VIEW.get(a.dtype)
        if idt is None:
            return False
        if a.numel() == 0:
            return True
        return torch.equal(a.contiguous().view(idt), e.contiguous().view(idt))
    return torch.equal(a, e)


def _rmse(x: torch.Tensor, r: torch.Tensor, mask: torch.Tensor) -> float:
    if not bool(mask.any()):
        return 0.0
    d = x.double()[mask] - r.double()[mask]
    return float(torch.sqrt((d * d).mean()))


def judge(
    actual,
    expected,
    *,
    reference64=None,
    exact: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
    k: float | None = None,
) -> Verdict:
    """Judge ``actual`` (device result) against ``expected`` (CPU result of the same dtype).

    Args:
        actual: a tensor on any device, or a Python number/bool.
        expected: the CPU reference, same shape and dtype as ``actual``.
        reference64: optional float64 (complex128) CPU reference of the same shape, used by the fp64 rule
            when the tolerance rule fails. Ignored for exact comparisons.
        exact: compare exactly whatever the dtype.
        atol, rtol: tolerance; default :func:`neuron_conformance.conformance.verdict.tolerances.default_tolerance` of the dtype.
        k: multiplier of the fp64 rule; default :func:`arbitration_k`.

    Returns:
        A :class:`Verdict`. Never raises for mismatching values; raises ``TypeError`` when ``actual`` and
        ``expected`` are not both tensors or both numbers.
    """
    if not isinstance(expected, torch.Tensor):
        return _judge_scalar(actual, expected, exact=exact, atol=atol, rtol=rtol)
    if not isinstance(actual, torch.Tensor):
        raise TypeError(f"expected a tensor result, got {type(actual).__name__}")
    dtype = expected.dtype
    if actual.dtype != dtype:
        return Verdict(False, "dtype", "metadata", message=f"dtype {actual.dtype} differs from the reference's {dtype}")
    if tuple(actual.shape) != tuple(expected.shape):
        return Verdict(
            False,
            "shape",
            "metadata",
            message=f"shape {tuple(actual.shape)} differs from the reference's {tuple(expected.shape)}",
        )
    if exact or is_exact_dtype(dtype):
        atol = rtol = 0.0
    else:
        base = default_tolerance(dtype)
        atol = base.atol if atol is None else atol
        rtol = base.rtol if rtol is None else rtol
    a, e = _as_real(actual), _as_real(expected)
    if torch._C._len_torch_dispatch_stack() == 0:
        return _judge_with_suspicion(a, e, actual, dtype, atol, rtol, reference64, k)
    # Everything below is the oracle's own arithmetic on CPU copies: keep Python dispatch modes (such as
    # the aten coverage mode, which only counts ops touching the device) out of it; they would add tens
    # of microseconds to each of its ~20 CPU ops and observe nothing they count.
    with _disable_current_modes():
        return _judge_with_suspicion(a, e, actual, dtype, atol, rtol, reference64, k)


REFERENCE_SUSPECT = "reference-suspect"
"""Rule and failure class of a verdict whose CPU reference is suspect (:func:`_judge_with_suspicion`)."""


def _judge_with_suspicion(a, e, actual, dtype, atol, rtol, reference64, k) -> Verdict:
    """:func:`_judge_real`, then, when the device failed and a float64 reference is given, the suspicion rule:
    the device's result within tolerance of the float64 reference rounded to ``dtype`` while the CPU's is not
    (``torch.testing.assert_close``'s tolerance of the dtype either way) makes the verdict
    ``reference-suspect``: the CPU op, not the device, is off the independent computation (a float32 mean
    that overflows to inf where the true mean is finite; a vectorized CPU path that loses precision)."""
    verdict = _judge_real(a, e, actual, dtype, atol, rtol, reference64, k)
    if verdict.passed or reference64 is None or verdict.failure_class not in ("numeric", "nonfinite"):
        return verdict
    if not isinstance(reference64, torch.Tensor) or tuple(reference64.shape) != tuple(a.shape):
        return verdict
    if not (dtype.is_floating_point or dtype.is_complex):
        return verdict
    if atol == 0 and rtol == 0:  # an exact op: both sides against float64 at the dtype's own tolerance
        base = default_tolerance(dtype)
        atol, rtol = base.atol, base.rtol
    rounded = _as_real(reference64.detach().cpu().to(dtype))
    device_side = _judge_real(a, rounded, rounded, dtype, atol, rtol, None, k)
    if not device_side.passed:
        return verdict
    cpu_side = _judge_real(e, rounded, rounded, dtype, atol, rtol, None, k)
    if cpu_side.passed:
        return verdict
    return Verdict(
        False,
        REFERENCE_SUSPECT,
        REFERENCE_SUSPECT,
        max_abs=verdict.max_abs,
        max_rel=verdict.max_rel,
        max_ulp=verdict.max_ulp,
        atol=atol,
        rtol=rtol,
        message="the device agrees with the float64 computation rounded to "
        f"{str(dtype).removeprefix('torch.')} and the CPU reference does not (CPU vs float64: {cpu_side.message})",
    )


def _judge_real(
    a: torch.Tensor,
    e: torch.Tensor,
    actual: torch.Tensor,
    dtype: torch.dtype,
    atol: float,
    rtol: float,
    reference64,
    k: float | None,
) -> Verdict:
    """The rules of :func:`judge` on the real CPU views ``a`` (device result) and ``e`` (reference)."""
    if dtype == torch.bool:
        a, e = a.to(torch.uint8), e.to(torch.uint8)
    if atol >= 0 and rtol >= 0 and _same_bits(a, e):
        # identical bit patterns (the common case): every rule below passes with zero error
        zero_ulp = 0.0 if a.is_floating_point() else None
        return Verdict(
            True,
            "exact" if atol == 0 and rtol == 0 else "tolerance",
            max_abs=0.0,
            max_rel=0.0,
            max_ulp=zero_ulp,
            atol=atol,
            rtol=rtol,
        )

    narrow = None
    if is_float8(dtype):
        # CPU float8 kernels stop at copies: judge float32 copies (exact: float32 holds every float8
        # value, NaN and inf) and count ULPs on the float8 bits
        narrow, a, e = (a, e), a.float(), e.float()
    if a.is_floating_point():
        a_fin, e_fin = torch.isfinite(a), torch.isfinite(e)
        both = a_fin & e_fin
        max_abs, max_rel, max_ulp = _error_sizes(a, e, both, narrow)
        sizes = dict(max_abs=max_abs, max_rel=max_rel, max_ulp=max_ulp, atol=atol, rtol=rtol)
        # non-finite values must match in position and kind (NaN, +inf, -inf)
        new_nonfinite = (~a_fin) & e_fin
        if bool(new_nonfinite.any()):
            idx = _first_index(new_nonfinite, actual)
            return Verdict(
                False,
                "nonfinite-positions",
                "nonfinite",
                **sizes,
                message=f"{int(new_nonfinite.sum())} non-finite value(s) where the reference is "
                f"finite (first at index {idx}: got {a[new_nonfinite][0].item()}, "
                f"expected {e[new_nonfinite][0].item()})",
            )
        lost = (~e_fin) & ~((torch.isnan(a) & torch.isnan(e)) | (a == e))
        if bool(lost.any()):
            idx = _first_index(lost, actual)
            return Verdict(
                False,
                "nonfinite-positions",
                "numeric",
                **sizes,
                message=f"{int(lost.sum())} NaN/inf value(s) of the reference not reproduced "
                f"(first at index {idx}: got {a[lost][0].item()}, expected {e[lost][0].item()})",
            )
    else:
        both = torch.ones_like(a, dtype=torch.bool)
        max_abs, max_rel, max_ulp = _error_sizes(a, e, both)
        sizes = dict(max_abs=max_abs, max_rel=max_rel, max_ulp=None, atol=atol, rtol=rtol)

    if atol == 0 and rtol == 0:
        equal = (a == e) | ~both
        if a.is_floating_point():
            equal &= (torch.signbit(a) == torch.signbit(e)) | ~both
        if bool(equal.all()):
            return Verdict(True, "exact", **sizes)
        bad = ~equal
        idx = _first_index(bad, actual)
        return Verdict(
            False,
            "exact",
            "numeric",
            **sizes,
            message=f"{int(bad.sum())} of {a.numel()} element(s) differ, exact equality "
            f"required (first at index {idx}: got {a[bad][0].item()!r}, expected "
            f"{e[bad][0].item()!r}; max abs error {max_abs:.3g}, max ULP {max_ulp})",
        )

    a64, e64 = a.double(), e.double()
    within = ((a64 - e64).abs() <= atol + rtol * e64.abs()) | ~both
    if bool(within.all()):
        return Verdict(True, "tolerance", **sizes)
    bad = ~within
    idx = _first_index(bad, actual)
    first = (
        f"{int(bad.sum())} of {a.numel()} element(s) outside atol={atol:g}, rtol={rtol:g} (first at "
        f"index {idx}: got {a[bad][0].item()!r}, expected {e[bad][0].item()!r}); max abs error "
        f"{max_abs:.3g}, max rel error {max_rel:.3g}, max ULP {max_ulp}"
    )
    if reference64 is None:
        return Verdict(False, "tolerance", "numeric", **sizes, message=first)

    r = _as_real(reference64).double()
    if tuple(r.shape) != tuple(a.shape):
        return Verdict(
            False,
            "tolerance",
            "numeric",
            **sizes,
            message=first + f"; fp64 reference has shape {tuple(r.shape)}, not used",
        )
    k = arbitration_k(dtype) if k is None else k
    mask = both & torch.isfinite(r)
    err_dev, err_cpu = _rmse(a64, r, mask), _rmse(e64, r, mask)
    bound = k * err_cpu + atol / 10
    cpu_worst = float((e64 - r).abs()[mask].max()) if bool(mask.any()) else 0.0
    ceiling = torch.clamp(CEILING * (atol + rtol * r.abs()), min=k * cpu_worst)
    over = ((a64 - r).abs() > ceiling) & mask
    extra = {"rmse_device_vs_fp64": err_dev, "rmse_cpu_vs_fp64": err_cpu, "k": k, "cpu_max_err_vs_fp64": cpu_worst}
    if err_dev <= bound and not bool(over.any()):
        return Verdict(True, "fp64", **sizes, extra=extra)
    why = (
        f"device RMSE vs fp64 {err_dev:.3g} > {k:g} x CPU RMSE vs fp64 {err_cpu:.3g} + atol/10"
        if err_dev > bound
        else f"{int(over.sum())} element(s) beyond the ceiling of max({CEILING:g} x (atol + rtol*|fp64|), "
        f"{k:g} x CPU's largest error vs fp64 {cpu_worst:.3g})"
    )
    return Verdict(False, "fp64", "numeric", **sizes, extra=extra, message=first + "; fp64 arbitration: " + why)


def _first_index(mask: torch.Tensor, like: torch.Tensor):
    flat = int(mask.reshape(-1).nonzero()[0])
    shape = tuple(like.shape)
    if like.is_complex():
        shape = shape + (2,)
    if not shape:
        return ()
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


def _judge_scalar(actual, expected, *, exact, atol, rtol) -> Verdict:
    if isinstance(actual, torch.Tensor) and actual.numel() == 1:
        actual = actual.item()
    if type(expected) is bool or not isinstance(expected, (int, float, complex)):
        ok = actual == expected
        return Verdict(
            bool(ok), "exact", None if ok else "numeric", message="" if ok else f"got {actual!r}, expected {expected!r}"
        )
    if not isinstance(actual, (int, float, complex)):
        return Verdict(
            False, "value", "metadata", message=f"got a {type(actual).__name__}, expected a {type(expected).__name__}"
        )
    if isinstance(expected, int) and isinstance(actual, int) or exact:
        ok = actual == expected or (_isnan(actual) and _isnan(expected))
        return Verdict(
            ok,
            "exact",
            None if ok else "numeric",
            max_abs=abs(actual - expected) if not ok else 0.0,
            message="" if ok else f"got {actual!r}, expected {expected!r}",
        )
    base = default_tolerance(torch.float32)
    atol = base.atol if atol is None else atol
    rtol = base.rtol if rtol is None else rtol
    if _isnan(expected) or _isnan(actual):
        ok = _isnan(expected) and _isnan(actual)
        return Verdict(
            ok,
            "nonfinite-positions",
            None if ok else "nonfinite",
            message="" if ok else f"got {actual!r}, expected {expected!r}",
        )
    diff = abs(actual - expected)
    ok = diff <= atol + rtol * abs(expected) or actual == expected
    return Verdict(
        ok,
        "tolerance",
        None if ok else "numeric",
        max_abs=float(diff) if diff == diff else None,
        atol=atol,
        rtol=rtol,
        message="" if ok else f"got {actual!r}, expected {expected!r}",
    )


def _isnan(x) -> bool:
    return isinstance(x, (float, complex)) and (x != x)


def check(actual, expected, *, where: str = "", **kwargs) -> Verdict:
    """Like :func:`judge`, but raise the matching ``ConformanceFailure`` when the verdict fails.

    ``where`` prefixes the message (e.g. ``"output 0 of sample 3"``). Returns the passing verdict.
    """
    verdict = judge(actual, expected, **kwargs)
    verdict.raise_if_failed(where)
    return verdict


__all__ = ["CEILING", "Verdict", "arbitration_k", "check", "judge", "ulp_distance"]
