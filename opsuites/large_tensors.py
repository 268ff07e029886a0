"""Tensors over 2^31 bytes and over 2^31 elements, checked at the addresses 32-bit indexing gets wrong.

A kernel that computes element or byte offsets in ``int32`` reads and writes the wrong place once an offset
passes 2^31 - 1: the first elements are right and the last ones are not (PyTorch's own kernels switch to
64-bit indexing past that point: ``TensorIterator::can_use_32bit_indexing`` and ``canUse32BitIndexMath`` in
aten/src/ATen/native/cuda). Each case builds one large tensor on the device whose values are known by
construction (``fill_``, ``arange``, a few written elements) and reads back the first element, the last
element and elements just past 2^31 (in elements or in bytes) through ops, views with large offsets and
strides, and copies to the CPU; small CPU reads of slices are compared with values computed on the CPU.

Sizes (element counts are odd past the power of two, so the last element is not on an aligned boundary):

* :data:`N_BYTE`: ``2^31 + 4099`` one-byte elements: over 2^31 bytes and over 2^31 elements (2.0 GiB);
* :data:`N_WORD`: ``2^29 + 1027`` four-byte elements: over 2^31 bytes, under 2^31 elements (2.0 GiB);
* :data:`N_FLOAT`: ``2^31 + 1027`` float32 elements (8.0 GiB): opt-in by a budget of 8 GiB and more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from neuron_conformance.conformance.verdict.failures import MetadataFailure, NumericFailure

TWO31 = 1 << 31
N_BYTE = TWO31 + 4099
N_WORD = (1 << 29) + 1027
N_FLOAT = TWO31 + 1027
SLACK = 64 << 20
"""Bytes a case may hold besides its large tensors (index tensors, small reads): 64 MiB."""


@dataclass
class Checks:
    """What a case verified, for the result record (``checked``: one line per read)."""

    where: str
    checked: list = field(default_factory=list)

    def equal(self, label: str, actual, expected) -> None:
        """``actual`` (a device tensor or a number) equals ``expected`` (CPU tensor or number) exactly.

        Raises:
            MetadataFailure: shape or dtype differ. NumericFailure: a value differs (rule ``exact``).
        """
        a = actual.cpu() if isinstance(actual, torch.Tensor) else torch.tensor(actual)
        e = expected if isinstance(expected, torch.Tensor) else torch.tensor(expected, dtype=a.dtype)
        if a.shape != e.shape or a.dtype != e.dtype:
            raise MetadataFailure(
                f"{self.where}: {label}: shape {tuple(a.shape)} {a.dtype}, expected {tuple(e.shape)} {e.dtype}"
            )
        if not torch.equal(a, e):
            diff = (a.double() - e.double()).abs()
            bad = int(diff.reshape(-1).argmax()) if diff.numel() else 0
            raise NumericFailure(
                f"{self.where}: {label}: got {a.reshape(-1)[bad].item()!r}, expected {e.reshape(-1)[bad].item()!r}"
                f" (element {bad} of the read; 32-bit indexing past 2^31?)",
                fields={"rule": "exact", "max_abs": float(diff.max()), "atol": 0.0, "rtol": 0.0},
            )
        self.checked.append(label)


@dataclass(frozen=True)
class LargeCase:
    """One large-tensor case.

    Attributes:
        name: the test id (``sum-uint8``); op: the op it is about (record ``op``, ``--conformance-ops``).
        dtype: dtype name of the large tensor; numel: its element count; blocks: how many such tensors
            it holds at its peak (``needs`` = blocks x numel x itemsize + :data:`SLACK`).
        run: ``run(device, checks)``: builds and checks; raises a ``ConformanceFailure``.
    """

    name: str
    op: str
    dtype: str
    numel: int
    blocks: int
    run: Callable

    @property
    def needs(self) -> int:
        """Bytes of device memory the case holds at its peak."""
        return self.blocks * self.numel * getattr(torch, self.dtype).itemsize + SLACK

    @property
    def variant(self) -> str:
        """``large-numel`` (over 2^31 elements) or ``large-bytes`` (over 2^31 bytes only)."""
        return "large-numel" if self.numel > TWO31 else "large-bytes"


def _probes(n: int) -> list[int]:
    """Element indices to read: first, last, and around 2^31 elements and 2^31 bytes when inside ``n``."""
    idx = {0, 1, n - 2, n - 1}
    for p in (TWO31 - 1, TWO31, TWO31 + 1, (TWO31 >> 2) - 1, TWO31 >> 2, (TWO31 >> 2) + 1):
        if p < n:
            idx.add(p)
    return sorted(idx)


def _fill(device, c: Checks) -> None:
    x = torch.empty(N_BYTE, dtype=torch.uint8, device=device).fill_(7)
    for i in _probes(N_BYTE):
        c.equal(f"fill_(7)[{i}]", x[i], 7)
    c.equal("fill_(7)[2^31:2^31+64] read to the CPU", x[TWO31 : TWO31 + 64], torch.full((64,), 7, dtype=torch.uint8))


def _written(device) -> tuple[torch.Tensor, dict]:
    """Zeros of :data:`N_BYTE` elements with distinct values 10, 11, ... written at the probe indices (their
    sum stays below 256, so a ``uint8`` sum is exact)."""
    x = torch.zeros(N_BYTE, dtype=torch.uint8, device=device)
    marks = {i: 10 + k for k, i in enumerate(_probes(N_BYTE))}
    for i, v in marks.items():
        x[i] = v
    return x, marks


def _reduce(device, c: Checks) -> None:
    x, marks = _written(device)
    c.equal(
        "sum(dtype=uint8) of the marks", x.sum(dtype=torch.uint8), torch.tensor(sum(marks.values()), dtype=torch.uint8)
    )
    c.equal(
        "sum(dim=0, dtype=uint8)", x.sum(dim=0, dtype=torch.uint8), torch.tensor(sum(marks.values()), dtype=torch.uint8)
    )
    c.equal("count_nonzero (int64)", torch.count_nonzero(x), torch.tensor(len(marks)))
    top = max(marks, key=marks.get)
    c.equal("max()", x.max(), torch.tensor(marks[top], dtype=torch.uint8))
    c.equal(f"argmax() (the largest mark is at {top})", x.argmax(), torch.tensor(top))


def _add(device, c: Checks) -> None:
    x, marks = _written(device)
    x.add_(3)
    for i in _probes(N_BYTE):
        c.equal(f"add_(3)[{i}]", x[i], marks[i] + 3)
    c.equal("add_(3)[2^31+2:2^31+66]", x[TWO31 + 2 : TWO31 + 66], torch.full((64,), 3, dtype=torch.uint8))
    y = x + 1
    c.equal("(x + 1)[-1]", y[-1], marks[N_BYTE - 1] + 4)
    c.equal("(x + 1)[2^31]", y[TWO31], marks[TWO31] + 4)


def _index(device, c: Checks) -> None:
    x, marks = _written(device)
    where = torch.tensor(sorted(marks), dtype=torch.int64)
    want = torch.tensor([marks[i] for i in sorted(marks)], dtype=torch.uint8)
    c.equal("index_select at the probes", x.index_select(0, where.to(device)), want)
    c.equal("x[index tensor] at the probes", x[where.to(device)], want)
    x[where.to(device)] = want.to(device) + 100  # index_put_
    c.equal("index_put_ then index_select", x.index_select(0, where.to(device)), want + 100)
    c.equal(
        "count_nonzero after index_put_ (no other element written)", torch.count_nonzero(x), torch.tensor(len(marks))
    )


def _copy(device, c: Checks) -> None:
    x, marks = _written(device)
    y = torch.empty_like(x).copy_(x)
    del x
    for i in _probes(N_BYTE):
        c.equal(f"copy_ then [{i}]", y[i], marks[i])
    c.equal(
        "copy_ then [2^31+2:2^31+66] read to the CPU", y[TWO31 + 2 : TWO31 + 66], torch.zeros(64, dtype=torch.uint8)
    )


def _arange(device, c: Checks) -> None:
    x = torch.arange(N_WORD, dtype=torch.int32, device=device)
    for i in _probes(N_WORD):
        c.equal(f"arange[{i}]", x[i], torch.tensor(i, dtype=torch.int32))
    c.equal("arange[-64:] read to the CPU", x[-64:], torch.arange(N_WORD - 64, N_WORD, dtype=torch.int32))
    c.equal("arange[-1024:].sum() (int64)", x[-1024:].sum(), torch.tensor(sum(range(N_WORD - 1024, N_WORD))))
    c.equal("arange.max()", x.max(), torch.tensor(N_WORD - 1, dtype=torch.int32))
    c.equal("arange.argmax() (int64)", x.argmax(), torch.tensor(N_WORD - 1))


def _views(device, c: Checks) -> None:
    x = torch.arange(N_WORD, dtype=torch.int32, device=device)
    step = 1 << 27
    offsets = [7 + k * step for k in range(4)]  # the last ones are past 2^31 bytes
    v = x.as_strided((4,), (step,), 7)
    c.equal("as_strided((4,), (2^27,), offset 7)", v, torch.tensor(offsets, dtype=torch.int32))
    tail = x.as_strided((3,), (1,), N_WORD - 3)
    c.equal("as_strided offset n-3", tail, torch.arange(N_WORD - 3, N_WORD, dtype=torch.int32))
    rows = x[: 1 << 29].view(1 << 15, 1 << 14)
    c.equal(
        "view(2^15, 2^14)[:, -1][-3:]",
        rows[:, -1][-3:],
        torch.tensor([((1 << 15) - k) * (1 << 14) - 1 for k in (2, 1, 0)], dtype=torch.int32),
    )
    c.equal(
        "view(...).t()[-1, -2:]",
        rows.t()[-1, -2:],
        torch.tensor([((1 << 15) - k) * (1 << 14) - 1 for k in (1, 0)], dtype=torch.int32),
    )
    c.equal(
        "narrow(0, n-100, 100).sum()",
        x.narrow(0, N_WORD - 100, 100).sum(),
        torch.tensor(sum(range(N_WORD - 100, N_WORD))),
    )


def _float_sum(device, c: Checks) -> None:
    x = torch.ones(N_FLOAT, dtype=torch.float32, device=device)
    x[-1] = 5.0
    x[TWO31] = 3.0
    c.equal("ones float32 [2^31]", x[TWO31], torch.tensor(3.0))
    c.equal("ones float32 [-1]", x[-1], torch.tensor(5.0))
    c.equal(
        "sum(dtype=float64) (exact: integers below 2^53)",
        x.sum(dtype=torch.float64),
        torch.tensor(float(N_FLOAT - 2 + 8), dtype=torch.float64),
    )


CASES: tuple[LargeCase, ...] = (
    LargeCase("fill-uint8", "fill_", "uint8", N_BYTE, 1, _fill),
    LargeCase("sum-uint8", "sum", "uint8", N_BYTE, 1, _reduce),
    LargeCase("add-uint8", "add", "uint8", N_BYTE, 2, _add),
    LargeCase("index-uint8", "index_select", "uint8", N_BYTE, 1, _index),
    LargeCase("copy-uint8", "copy_", "uint8", N_BYTE, 2, _copy),
    LargeCase("arange-int32", "arange", "int32", N_WORD, 1, _arange),
    LargeCase("views-int32", "as_strided", "int32", N_WORD, 1, _views),
    LargeCase("sum-float32", "sum", "float32", N_FLOAT, 1, _float_sum),
)
"""Every large-tensor case, in the order they run."""
