"""Tolerance policy: which ``atol``/``rtol`` a comparison uses, and where each number comes from.

The rules, in order:

1. Integer, bool and exactly specified results compare exactly (``atol = rtol = 0``). Exactness follows
   the *output's* dtype, not the inputs': an op that computes a floating result from integer or bool inputs
   (``asinh``, ``atan2``, ``erf``, ``special.*``, ``softmax(dtype=)``, ``fft.*``, ``cov`` on an int64 input
   return float32) is judged with that output dtype's tolerance (:func:`for_output`), as
   ``torch.testing.assert_close`` picks its tolerance from the compared tensors' dtype
   (``torch/testing/_comparison.py``, ``default_tolerances(actual, expected)``).
2. A backend that declares it mirrors the CPU kernels (the emulator's mirror mode, ``--conformance-device cpu``)
   compares exactly for every dtype.
3. An OpInfo's own tolerance override for the dtype (``toleranceOverride`` in its ``decorators``, the
   ones PyTorch applies to its device-generic numeric tests), when larger than the default.
4. Otherwise the ``torch.testing.assert_close`` defaults for the dtype; float8 dtypes, which that table
   lacks, get :func:`float8_tolerance` (one unit in the last place of the format).
5. Gradients are never held to the forward's exact class (:func:`for_gradient`): the backward of a
   data-movement, indexing or selection op accumulates (``expand``/``repeat``/broadcasting reduce with a sum,
   ``index_select``/``gather``/``embedding``/``max_pool`` scatter-add), and PyTorch documents those backwards
   as nondeterministic on CUDA (docs, "Reproducibility" and ``torch.use_deterministic_algorithms``: they use
   ``atomicAdd``), so their order of summation is the device's. The dtype's tolerance with fp64
   arbitration applies; a backend that mirrors the CPU kernels stays exact.

Sources: the default table is ``torch/testing/_comparison.py`` (``_DTYPE_PRECISIONS``) of torch 2.13;
OpInfo overrides come from ``torch/testing/_internal/common_methods_invocations.py``; the float8 formats
from :mod:`neuron_conformance.conformance.verdict.float8_formats` (OCP OFP8 v1.0, OCP MX v1.0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from neuron_conformance.conformance.verdict.float8_formats import format_of, is_float8

# (rtol, atol) per dtype: torch/testing/_comparison.py, _DTYPE_PRECISIONS (torch 2.13)
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (1e-3, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}

# OpInfo decorators whose tolerance overrides apply to a device-vs-CPU comparison: overrides declared for
# every test (test_name None) or for PyTorch's own numeric consistency tests.
_OVERRIDE_TESTS = {None, "test_compare_cpu", "test_noncontiguous_samples", "test_variant_consistency_eager", "test_out"}


CPU_NONDETERMINISTIC = {
    # linalg.lstsq's default CPU driver (gelsy, LAPACK through MKL) gave 4 to 6 distinct results in 100
    # calls on one input, on one thread, with torch 2.13's CPU build: a bitwise mirror of the CPU cannot
    # be demanded of it, so it is judged with the dtype's tolerances even for backends that mirror CPU.
    "linalg.lstsq",
    "linalg.lstsq.grad_oriented",
}
"""OpInfos whose CPU reference is not reproducible call to call (exact comparison never demanded)."""


@dataclass(frozen=True)
class Tolerance:
    """An absolute and relative tolerance, and the rule that chose them.

    A value ``a`` passes against the reference ``e`` when ``|a - e| <= atol + rtol * |e|``
    (the ``torch.testing.assert_close`` rule).

    Attributes:
        atol: absolute tolerance, in the units of the compared values.
        rtol: relative tolerance (dimensionless).
        source: ``exact``, ``mirror``, ``opinfo-override`` or ``default``.
        dtype: the dtype the tolerance was chosen for (None for exact ones, but for an exact tolerance that
            is exact only because the test's dtype is an integer or bool dtype); :func:`for_output` reads it.
            Not part of equality.
    """

    atol: float
    rtol: float
    source: str
    dtype: torch.dtype | None = field(default=None, compare=False)

    @property
    def exact(self) -> bool:
        """True when the comparison is exact equality."""
        return self.atol == 0 and self.rtol == 0


EXACT = Tolerance(0.0, 0.0, "exact")


def is_exact_dtype(dtype: torch.dtype) -> bool:
    """True for dtypes whose results are compared exactly: integers and bool."""
    return not (dtype.is_floating_point or dtype.is_complex)


def float8_tolerance(dtype: torch.dtype) -> Tolerance:
    """The tolerance of a float8 result (an op other than a cast, which is compared bit for bit):
    ``rtol = eps = 2**-m`` and ``atol`` = the format's smallest positive value.

    A float8 result is a wider computation rounded once to the format; two implementations that
    accumulate in another order may round to neighbouring values, one unit in the last place (ULP) apart.
    One ULP is at most ``eps * |e|`` for normal values (the ULP of ``[2**k, 2**(k+1))`` is ``eps * 2**k``)
    and the smallest subnormal below the normal range, so ``atol + rtol * |e|`` admits one ULP everywhere;
    two ULPs (``2 eps 2**k``) exceed ``eps * |e|`` for every ``|e| < 2**(k+1)``, so they fail except
    where ``atol`` tips the balance, at the smallest normals.
    The same rule gives torch.testing's float16 entry (``rtol`` 1e-3, eps 2**-10 = 9.8e-4).

    Values (torch 2.13): e4m3fn rtol 0.125, atol 2**-9; e5m2 0.25, 2**-16; e4m3fnuz 0.125, 2**-10;
    e5m2fnuz 0.25, 2**-17; e8m0fnu (powers of two) 1.0, 2**-127.

    Source: eps and the smallest value from the bit layouts of OCP OFP8 v1.0 table 1 and OCP MX v1.0
    section 5.4.1 (:mod:`neuron_conformance.conformance.verdict.float8_formats`; not ``torch.finfo``, whose
    ``float8_e5m2fnuz`` eps is wrong in torch 2.13).

    Raises:
        KeyError: ``dtype`` is not a float8 dtype.
    """
    fmt = format_of(dtype)
    return Tolerance(atol=fmt.smallest_positive, rtol=fmt.eps, source="default", dtype=dtype)


def default_tolerance(dtype: torch.dtype) -> Tolerance:
    """The ``torch.testing`` default tolerance for ``dtype`` (exact for integers and bool), and
    :func:`float8_tolerance` for the float8 dtypes.

    Raises:
        KeyError: a floating dtype that is neither in :data:`DEFAULT_TOLERANCES` nor a float8 format.
    """
    if is_exact_dtype(dtype):
        return EXACT
    if is_float8(dtype):
        return float8_tolerance(dtype)
    if dtype not in DEFAULT_TOLERANCES:
        raise KeyError(
            f"no default tolerance for dtype {dtype} (known: "
            f"{', '.join(str(d) for d in DEFAULT_TOLERANCES)} and the float8 dtypes)"
        )
    rtol, atol = DEFAULT_TOLERANCES[dtype]
    return Tolerance(atol=atol, rtol=rtol, source="default", dtype=dtype)


def for_output(tolerance: Tolerance, output_dtype: torch.dtype) -> Tolerance:
    """The tolerance an output of ``output_dtype`` is judged with, in a test whose tolerance is
    ``tolerance`` (chosen for ``tolerance.dtype``, the test's dtype).

    A floating output of a test whose dtype is an integer or bool dtype (exact only because of that
    dtype) gets its own dtype's default tolerance (rule 1). Otherwise outputs share the test's tolerance,
    except where one of the two dtypes is float8 and they differ:
    a float8 test's bfloat16 output (``_scaled_mm_v2``) gets its own dtype's default, not the float8 one
    (eight times looser than bfloat16's), and a float8 output of another dtype's test gets
    :func:`float8_tolerance`. Exact and mirror tolerances are kept.
    """
    test_dtype = tolerance.dtype
    if (
        tolerance.exact
        and test_dtype is not None
        and is_exact_dtype(test_dtype)
        and (output_dtype.is_floating_point or output_dtype.is_complex)
    ):
        return default_tolerance(output_dtype)  # rule 1: exactness follows the output's dtype
    if tolerance.exact or test_dtype is None or output_dtype == test_dtype or not output_dtype.is_floating_point:
        return tolerance
    if not (is_float8(test_dtype) or is_float8(output_dtype)):
        return tolerance
    base = default_tolerance(output_dtype)
    if tolerance.source == "opinfo-override":
        return Tolerance(max(base.atol, tolerance.atol), max(base.rtol, tolerance.rtol), tolerance.source, output_dtype)
    return base


def for_gradient(tolerance: Tolerance, dtype: torch.dtype, *, mirrors_cpu: bool = False) -> Tolerance:
    """The tolerance gradients of a ``dtype`` test are judged with, when the forward is judged with
    ``tolerance`` (rule 5): an exact-class op's floating gradient gets the dtype's default tolerance,
    unless the backend mirrors the CPU kernels (``mirrors_cpu``: bitwise stays); others are kept."""
    if not mirrors_cpu and tolerance.source == "exact" and (dtype.is_floating_point or dtype.is_complex):
        return default_tolerance(dtype)
    return tolerance


def opinfo_override(opinfo, dtype: torch.dtype, device_type: str | None = None) -> tuple[float, float] | None:
    """Largest ``(atol, rtol)`` that ``opinfo`` declares for ``dtype`` with ``toleranceOverride``, or None.

    Only decorators that apply to every test or to PyTorch's numeric consistency tests count (see
    ``_OVERRIDE_TESTS``), and only those for all device types, CPU, or ``device_type``.
    """
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    best: tuple[float, float] | None = None
    for info in getattr(opinfo, "decorators", ()) or ():
        if not isinstance(info, DecorateInfo) or info.test_name not in _OVERRIDE_TESTS:
            continue
        if info.device_type not in (None, "cpu", device_type):
            continue
        for deco in info.decorators:
            if isinstance(deco, toleranceOverride) and dtype in deco.d:
                tol = deco.d[dtype]
                cand = (float(tol.atol), float(tol.rtol))
                best = cand if best is None else (max(best[0], cand[0]), max(best[1], cand[1]))
    return best


def tolerance_for(
    dtype: torch.dtype, *, opinfo=None, mirrors_cpu: bool = False, exact: bool = False, device_type: str | None = None
) -> Tolerance:
    """The tolerance a comparison of results of ``dtype`` uses, following the module's rules.

    Args:
        dtype: dtype of the compared result.
        opinfo: the OpInfo under test, whose overrides are honoured (optional).
        mirrors_cpu: the backend declares it runs the CPU kernels: compare exactly.
        exact: the result is exactly specified (see :mod:`neuron_conformance.conformance.verdict.exact`): compare exactly.
        device_type: device type under test, to pick device-specific OpInfo overrides.
    """
    if exact:
        return EXACT
    if is_exact_dtype(dtype):
        # exact for integer and bool outputs; a floating output of this integer test is judged at its own
        # dtype (for_output), unless the backend mirrors the CPU kernels (then every output is exact)
        return EXACT if mirrors_cpu else Tolerance(0.0, 0.0, "exact", dtype=dtype)
    if mirrors_cpu and getattr(opinfo, "full_name", None) not in CPU_NONDETERMINISTIC:
        return Tolerance(0.0, 0.0, "mirror")
    base = default_tolerance(dtype)
    if opinfo is not None:
        over = opinfo_override(opinfo, dtype, device_type)
        if over is not None and (over[0] > base.atol or over[1] > base.rtol):
            return Tolerance(max(over[0], base.atol), max(over[1], base.rtol), "opinfo-override", dtype)
    return base
