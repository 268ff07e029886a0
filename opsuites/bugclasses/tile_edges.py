"""Sizes at kernel tile and vector edges, and reductions long enough to show the accumulator.

Vectorised kernels run a main loop over whole vectors (8, 16, 64 elements) or tiles (128, 256, 512) and
an epilogue over the rest; matmul kernels tile M, N and K the same way. A missing or wrong epilogue shows
only at a size one past (or one short of) a multiple of the vector or tile width, which OpInfo's small
sample sizes rarely hit. Long reductions (``>= 2**20`` elements) show a kernel that accumulates in the
storage dtype: the CPU reduces ``bfloat16``/``float16`` with a ``float32`` accumulator (ATen's
``acc_type`` for reduced floating types, ``aten/src/ATen/AccumulateType.h``; the cascade sum of
``aten/src/ATen/native/cpu/SumKernel.cpp``), and the device must be within tolerance of the
fp64-arbitrated answer (:mod:`neuron_conformance.conformance.verdict.oracle`, rule 5).

Sources: elementwise ``torch.add``/``mul``/``exp``/``tanh``, ``torch.sum``/``amax``/``mean``,
``torch.mm``/``bmm`` in PyTorch's docs: their results do not depend on the size beyond the math.
"""

from __future__ import annotations

import torch

from neuron_conformance.opsuites.bugclasses.case import BugCase

BUG_CLASS = "tile-edges"
DESCRIPTION = (
    "sizes at vector/tile edges (1 ... 4097) for elementwise ops, reductions and mm/bmm; "
    "reductions of >= 2**20 elements in float32/bfloat16/float16"
)

_FLOATS = ("float32", "bfloat16", "float16")

SIZES = (1, 7, 17, 31, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 4097)
"""Lengths around the vector widths (8, 64 elements) and tile widths (128, 256, 512) kernels use."""

_BANDS = {"vector": SIZES[:7], "tile": SIZES[7:13], "block": SIZES[13:]}

_ELEMENTWISE = {
    "add": lambda a, b: torch.add(a, b),
    "mul": lambda a, b: torch.mul(a, b),
    "exp": lambda a, b: torch.exp(a),
    "tanh": lambda a, b: torch.tanh(a),
}

_REDUCTIONS = {"sum": torch.sum, "amax": torch.amax}

MATMULS = (
    (1, 1, 1),
    (7, 17, 31),
    (63, 64, 65),
    (64, 65, 63),
    (127, 128, 129),
    (129, 127, 128),
    (255, 257, 1),
    (1, 256, 257),
    (511, 1, 513),
    (17, 513, 7),
)
"""``(M, N, K)`` of the mm cases: each dim at or one off a tile edge, and the degenerate 1s."""

BMMS = ((3, 63, 65, 64), (2, 129, 127, 128), (3, 7, 257, 17))
"""``(B, M, N, K)`` of the bmm cases."""

LARGE = 2**20 + 7
"""Length of the long reductions: ``2**20`` plus a tail that is not a multiple of any vector width."""


def _randn(shape, dtype, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def _elementwise(op, sizes, dtype, seed):
    fn = _ELEMENTWISE[op]

    def build():
        pairs = [(_randn((n,), dtype, seed + n), _randn((n,), dtype, seed + 2 * n)) for n in sizes]
        return (lambda *xs: [fn(a, b) for a, b in zip(xs[::2], xs[1::2])]), tuple(t for p in pairs for t in p), {}

    return build


def _reduction(op, sizes, dtype, seed):
    red = _REDUCTIONS[op]

    def fn(*xs):
        # per size: the whole 1-D vector, a (n, 3) input along dim 0, a (3, n) input along dim 1
        return [(red(v), red(c, 0), red(r, 1)) for v, c, r in zip(xs[::3], xs[1::3], xs[2::3])]

    def build():
        xs = [
            (_randn((n,), dtype, seed + n), _randn((n, 3), dtype, seed + 2 * n), _randn((3, n), dtype, seed + 3 * n))
            for n in sizes
        ]
        return fn, tuple(t for p in xs for t in p), {}

    return build


def _matmul(shape, dtype, seed):
    def build():
        *b, m, n, k = shape
        return (
            (torch.bmm if b else torch.mm),
            (_randn((*b, m, k), dtype, seed), _randn((*b, k, n), dtype, seed + 1)),
            {},
        )

    return build


def _large(op, values, dtype, seed, shape=(LARGE,), dim=None):
    def build():
        g = torch.Generator().manual_seed(seed)
        x = torch.rand(shape, generator=g) if values == "uniform" else torch.randn(shape, generator=g)
        fn = getattr(torch, op)
        return (lambda t: fn(t) if dim is None else fn(t, dim)), (x.to(dtype),), {}

    return build


def _large_cases(dt: str) -> list[BugCase]:
    dtype = getattr(torch, dt)
    acc = (
        "reduces with a float32 accumulator for reduced floating types (ATen acc_type, "
        "AccumulateType.h); judged with the oracle's tolerance and fp64 arbitration"
    )
    specs = [
        ("sum", "normal", (LARGE,), None),
        ("mean", "uniform", (LARGE,), None),
        ("sum", "normal", (64, 16385), 1),
        ("mean", "uniform", (16385, 64), 0),
    ]
    if dt != "float16":  # the sum of 2**20 values of U[0, 1) is ~5e5: past float16's max 65504 (both inf)
        specs.append(("sum", "uniform", (LARGE,), None))
    out = []
    for i, (op, values, shape, dim) in enumerate(specs):
        name = f"{op}-{values}-{'x'.join(map(str, shape))}" + (f"-dim{dim}" if dim is not None else "")
        out.append(
            BugCase(
                BUG_CLASS,
                name,
                op,
                dt,
                _large(op, values, dtype, 900 + i, shape, dim),
                f"torch.{op} of {LARGE if dim is None else shape} elements: the CPU {acc}",
                min_bytes=2 * LARGE * dtype.itemsize,
            )
        )
    return out


def cases() -> list[BugCase]:
    """Elementwise and reduction cases per size band, mm/bmm per shape, and the long reductions, in
    each default floating dtype."""
    out = []
    for dt in _FLOATS:
        dtype = getattr(torch, dt)
        for op in _ELEMENTWISE:
            for band, sizes in _BANDS.items():
                out.append(
                    BugCase(
                        BUG_CLASS,
                        f"{op}-{band}-{'-'.join(map(str, sizes))}",
                        op,
                        dt,
                        _elementwise(op, sizes, dtype, 10),
                        f"torch.{op} is elementwise at every length, including the vector tail (PyTorch docs)",
                    )
                )
        for op in _REDUCTIONS:
            for band, sizes in _BANDS.items():
                out.append(
                    BugCase(
                        BUG_CLASS,
                        f"{op}-{band}-{'-'.join(map(str, sizes))}",
                        op,
                        dt,
                        _reduction(op, sizes, dtype, 20),
                        f"torch.{op} reduces every element, "
                        "including the tail past the last whole vector (PyTorch docs)",
                        exact=op == "amax",
                    )
                )
        for shape in MATMULS + BMMS:
            op = "mm" if len(shape) == 3 else "bmm"
            out.append(
                BugCase(
                    BUG_CLASS,
                    f"{op}-{'x'.join(map(str, shape))}",
                    op,
                    dt,
                    _matmul(shape, dtype, 30),
                    f"torch.{op}: every output element sums all K products, whatever the tiling of "
                    "M, N and K (PyTorch docs)",
                )
            )
        out.extend(_large_cases(dt))
    return out
