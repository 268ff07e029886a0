"""Float8 casts on the device under test, bit for bit against the CPU.

One test per cast of :func:`neuron_conformance.opsuites.float8_cases.cast_cases` for the float8 dtypes
``--conformance-dtypes`` selects (none by default: name them, or ``all``): each float8 format to and from
float32, bfloat16 and float16, and to every other selected float8 format. The input
(:mod:`neuron_conformance.opsuites.float8_cases`: all 256 bit patterns of a float8 source; the rounding
boundaries, overflow and underflow edges, signed zeros and NaNs of a wider one) is built on the CPU, moved
to the device by its bytes, cast there with ``Tensor.to(dtype)`` (``aten::_to_copy``) and read back. Checked,
in order:

1. the bytes reached the device unchanged (read back before the cast; else the transfer failed, not the
   cast: class ``error``);
2. the cast's result is on the device, of the target dtype and shape;
3. its bit patterns equal the CPU cast's, element for element: rounding (ties to even), saturation or
   NaN/inf on overflow (which the formats and their implementations differ in: CPU saturates e4m3fn,
   gives inf for e5m2 and NaN for the fnuz formats), subnormals, the sign of zero, and NaNs **with their
   payloads and signs**. Rule ``bit-exact``, class ``numeric``.

Why NaN payloads count: torch's CPU casts are bit manipulations (``c10/util/Float8_*.h``, ``Half.h``,
``BFloat16.h``) that give the same bits on every CPU, whatever the vector width (checked: scalar,
vectorized and strided casts agree), so the reference defines them; the formats give a cast little
freedom (e4m3fn's two NaNs differ only in sign, the fnuz formats have one NaN). A device that differs
only in NaN payloads is told so in the message (``NaN payloads only``), so a manifest entry can accept
that and nothing else.

Records: suite ``float8_casts``, op ``aten::_to_copy``, dtype the float8 one, variant ``from_<src>``
(casts to float8) or ``to_<dst>``; a failing record's ``max_ulp`` is the largest distance in units of the
target format, ``samples`` the number of elements. Tests need the ``float8`` capability
(:mod:`neuron_conformance.conformance.backend.capabilities`): a backend that does not claim it gets ``not-claimed``.
"""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.backend.transfer import to_device_exact
from neuron_conformance.conformance.pytest_plugin.options import selected_dtypes
from neuron_conformance.conformance.verdict.failures import ConformanceFailure, MetadataFailure, NumericFailure
from neuron_conformance.conformance.verdict.oracle import ulp_distance
from neuron_conformance.opsuites.float8_cases import bits, cast_cases, cast_input

SUITE = "float8_casts"
OP = "aten::_to_copy"
SHOWN = 4
"""Mismatching elements a failure message lists."""


def _params(selected) -> list:
    """One ``pytest.param`` per cast of the float8 dtypes among ``selected`` (dtype names)."""
    return [
        pytest.param(
            c,
            id=c.id,
            marks=[
                pytest.mark.conformance(op=OP, dtype=c.float8, variant=c.variant, suite=SUITE),
                pytest.mark.capability("float8"),
                pytest.mark.xdist_group(f"float8-{c.float8}"),
            ],
        )
        for c in cast_cases(selected)
    ]


def pytest_generate_tests(metafunc):
    if "cast_case" in metafunc.fixturenames:
        metafunc.parametrize("cast_case", _params(selected_dtypes(metafunc.config)))


def _describe(x, got, want, bad) -> str:
    """The first :data:`SHOWN` mismatching elements: input, CPU and device results, values and bits."""
    rows = []
    xb, gb, wb = bits(x), bits(got), bits(want)
    for i in bad.nonzero().flatten()[:SHOWN].tolist():
        width = 2 * want.element_size()
        rows.append(
            f"[{i}] {x[i : i + 1].double().item()!r} (0x{xb[i].item() & 0xFFFFFFFF:0{2 * x.element_size()}x})"
            f" -> device {got[i : i + 1].double().item()!r} (0x{gb[i].item() & 0xFFFFFFFF:0{width}x}),"
            f" CPU {want[i : i + 1].double().item()!r} (0x{wb[i].item() & 0xFFFFFFFF:0{width}x})"
        )
    return "; ".join(rows)


def test_float8_casts(cast_case, device, conformance_record):
    dst = getattr(torch, cast_case.dst)
    where = f"{cast_case.src} -> {cast_case.dst}"
    x = cast_input(cast_case)
    conformance_record.update(samples=int(x.numel()), atol=0.0, rtol=0.0)
    expected = x.to(dst)
    dev_x = to_device_exact(x, device)
    if not torch.equal(bits(dev_x.cpu()), bits(x)):
        raise ConformanceFailure(
            f"{where}: the {cast_case.src} input's bytes changed on the way to the device and back, before any cast"
        )
    actual = dev_x.to(dst)
    if actual.device.type != device.type:
        raise MetadataFailure(f"{where}: the cast's result is on {actual.device}, expected a {device.type} tensor")
    if actual.dtype != dst or actual.shape != expected.shape:
        raise MetadataFailure(
            f"{where}: the cast gave {actual.dtype} {tuple(actual.shape)}, the CPU {dst} {tuple(expected.shape)}"
        )
    got = actual.cpu()
    bad = bits(got) != bits(expected)
    n_bad = int(bad.sum())
    conformance_record.update(rule="bit-exact", max_abs=0.0, max_ulp=0.0)
    if not n_bad:
        return
    wide_g, wide_e = got.float(), expected.float()
    nan_only = bool((wide_g.isnan() & wide_e.isnan())[bad].all())
    finite = bad & wide_g.isfinite() & wide_e.isfinite()
    max_abs = float((wide_g.double() - wide_e.double()).abs()[finite].max()) if bool(finite.any()) else None
    max_ulp = float(ulp_distance(got, expected)[finite].max()) if bool(finite.any()) else None
    kind = (
        "NaN payloads only"
        if nan_only
        else f"{int(finite.sum())} finite, {n_bad - int(finite.sum())} non-finite on either side"
    )
    raise NumericFailure(
        f"{where}: {n_bad} of {x.numel()} element(s) differ from the CPU cast bit for bit "
        f"({kind}): {_describe(x, got, expected, bad)}",
        fields={"rule": "bit-exact", "max_abs": max_abs, "max_ulp": max_ulp, "atol": 0.0, "rtol": 0.0},
    )
