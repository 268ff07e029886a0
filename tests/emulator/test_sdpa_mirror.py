"""Mirror mode's ``scaled_dot_product_attention`` is bitwise equal to CPU's, gradients included.

On CPU the composite (aten/src/ATen/native/transformers/attention.cpp) asks ``_fused_sdp_choice`` for a
backend: the flash kernel ``_scaled_dot_product_flash_attention_for_cpu`` unless one of the gates of
``use_flash_attention_cpp`` (sdp_utils_cpp.cpp) refuses (the global flash switch, nested input, dropout,
non-4-D input (torch 2.13; from 2.14 a 3-D input is batched to 4-D), batch/head counts, an ``attn_mask``
that requires grad or has a shape other than 2-D or 4-D-broadcastable, unequal head dims, an empty
sequence, a last-dim stride other than 1, the dtype), then math if the global math switch allows it.
Flash cannot differentiate the mask, so picking it for a mask that requires grad (what asking on CPU
aliases without the flag did) raised "not differentiable with respect to argument 'attn_mask'" and, under
``no_grad``, differed from CPU by 3.6e-7. Every case below runs on CPU and on the emulated device and must
give the same bits, or the same error message.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from neuron_conformance.emulator import sdpa_mirror

SDPA = "nn.functional.scaled_dot_product_attention"


def _sdpa_opinfo():
    from torch.testing._internal.common_methods_invocations import op_db  # deferred: 2 s import, this module only

    return next(op for op in op_db if op.name == SDPA)


def _moved(t, device):
    """``t`` copied to ``device`` as a leaf keeping its ``requires_grad`` (non-tensors unchanged)."""
    if not isinstance(t, torch.Tensor):
        return t
    return t.detach().to(device).requires_grad_(t.requires_grad)


def _run(fn, tensors, device, *, grad_enabled=True, context=contextlib.nullcontext, seed=None):
    """``(output, gradients of the tensors that require grad)`` on CPU, or ``("raised", message)``."""
    leaves = [_moved(t, device) for t in tensors]
    try:
        with context(), torch.set_grad_enabled(grad_enabled):
            if seed is not None:
                torch.manual_seed(seed)
            out = fn(*leaves)
            wanted = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
            grads = torch.autograd.grad(out.sum(), wanted, allow_unused=True) if out.requires_grad else ()
    except RuntimeError as exc:
        return "raised", str(exc).splitlines()[0]
    return out.detach().cpu(), [None if g is None else g.cpu() for g in grads]


def _assert_same(fn, tensors, what, **kwargs):
    cpu = _run(fn, tensors, "cpu", **kwargs)
    dev = _run(fn, tensors, "neuron", **kwargs)
    raised = [r[1] if isinstance(r[0], str) else None for r in (cpu, dev)]
    if raised != [None, None]:
        assert raised[0] == raised[1], f"{what}: CPU raised {raised[0]!r}, the device raised {raised[1]!r}"
        return
    assert dev[0].dtype == cpu[0].dtype and torch.equal(dev[0], cpu[0]), (
        f"{what}: output differs by {(dev[0].double() - cpu[0].double()).abs().max():.3g}"
    )
    assert len(dev[1]) == len(cpu[1]), f"{what}: {len(dev[1])} gradients on the device, {len(cpu[1])} on CPU"
    for i, (d, c) in enumerate(zip(dev[1], cpu[1])):
        assert (d is None) == (c is None), f"{what}: gradient {i} exists on one side only"
        assert d is None or torch.equal(d, c), f"{what}: gradient {i} differs by {(d - c).abs().max():.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_every_opinfo_sample_is_bitwise_equal_with_gradients(mirror_mode, dtype):
    samples = list(_sdpa_opinfo().sample_inputs("cpu", dtype, requires_grad=True))
    assert len(samples) >= 20  # torch 2.13: 25 per dtype; a shrinking sample set would hide cases
    masks_requiring_grad = 0
    for index, s in enumerate(samples):
        names = list(s.kwargs)
        tensors = [s.input, *s.args, *s.kwargs.values()]
        masks_requiring_grad += bool(getattr(s.kwargs.get("attn_mask"), "requires_grad", False))

        def fn(q, *rest, names=names, n_args=len(s.args)):
            return F.scaled_dot_product_attention(q, *rest[:n_args], **dict(zip(names, rest[n_args:])))

        for grad_enabled in (True, False):
            _assert_same(fn, tensors, f"{dtype} sample {index} (grad {grad_enabled})", grad_enabled=grad_enabled)
    assert masks_requiring_grad > 0  # the case the backend choice got wrong (sample 24 on torch 2.13)


def _qkv(dtype=torch.float32, kv_heads=4):
    gen = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_()

    return randn(2, 4, 5, 8), randn(2, kv_heads, 7, 8), randn(2, kv_heads, 7, 8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_t5_style_position_bias_mask_requiring_grad(mirror_mode, dtype):
    """T5 passes its learned relative position bias, shape (1, heads, q_len, kv_len), as a float mask that
    requires grad: CPU takes math there (the flash gate refuses a mask requiring grad, also under no_grad)."""
    q, k, v = _qkv(dtype)
    bias = torch.randn(1, 4, 5, 7, generator=torch.Generator().manual_seed(1), dtype=dtype).requires_grad_()

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=1.0)

    for grad_enabled in (True, False):
        _assert_same(fn, [q, k, v, bias], f"T5 bias {dtype} grad {grad_enabled}", grad_enabled=grad_enabled)
    _assert_same(fn, [q, k, v, bias.detach()], f"detached T5 bias {dtype} (flash on CPU)")


def _flags(flash: bool, math: bool):
    @contextlib.contextmanager
    def context():
        before = torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()
        torch.backends.cuda.enable_flash_sdp(flash)
        torch.backends.cuda.enable_math_sdp(math)
        try:
            yield
        finally:
            torch.backends.cuda.enable_flash_sdp(before[0])
            torch.backends.cuda.enable_math_sdp(before[1])

    return context


CASES = {
    "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), {}),
    "causal, scale": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3), {}),
    "3-D input": (lambda q, k, v: F.scaled_dot_product_attention(q[0], k[0], v[0]), {}),
    "query last dim strided (math)": (
        lambda q, k, v: F.scaled_dot_product_attention(q.transpose(-1, -2).contiguous().transpose(-1, -2), k, v),
        {},
    ),
    "dropout (math, seeded RNG)": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3), {"seed": 7}),
    "bool mask": (
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.ones(5, 7, dtype=torch.bool, device=q.device).tril()
        ),
        {},
    ),
    "mask and is_causal (both raise)": (
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.zeros(5, 7, device=q.device), is_causal=True
        ),
        {},
    ),
    "sdpa_kernel(MATH)": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        {"context": lambda: sdpa_kernel(SDPBackend.MATH)},
    ),
    "sdpa_kernel(EFFICIENT) (both raise)": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        {"context": lambda: sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)},
    ),
    "global flash off": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), {"context": _flags(False, True)}),
    "global math off, mask requiring grad (both raise)": (
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.zeros(5, 7, device=q.device, requires_grad=True)
        ),
        {"context": _flags(True, False)},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_backend_choice_cases(mirror_mode, case):
    fn, kwargs = CASES[case]
    _assert_same(fn, list(_qkv()), case, **kwargs)


def test_grouped_query_attention(mirror_mode):
    q, k, v = _qkv(kv_heads=2)
    _assert_same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), [q, k, v], "gqa")
    _assert_same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [q, k, v], "2 kv heads without gqa")


THREE_D_MASKS = {
    "no mask": None,
    "2-D float mask": lambda: torch.randn(5, 7),
    "2-D bool mask": lambda: torch.ones(5, 7, dtype=torch.bool).tril(),
    "1-D float mask": lambda: torch.randn(7),
    "3-D float mask": lambda: torch.randn(4, 5, 7),
    "3-D float mask, batch 1": lambda: torch.randn(1, 5, 7),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", list(THREE_D_MASKS))
def test_three_dimensional_inputs(mirror_mode, mask, dtype):
    """3-D query, key and value (heads, length, dim): the CPU answers math for them (torch 2.13) or flash, which
    its composite runs on the inputs with a leading batch dimension of 1 and the mask grown to 4 dimensions
    (torch >= 2.14); the device follows whichever the running torch does, with and without a causal mask."""
    q, k, v = (t[0] for t in _qkv(dtype))
    make = THREE_D_MASKS[mask]
    tensors = [q, k, v] if make is None else [q, k, v, make().to(dtype) if mask.endswith("float mask") else make()]
    for is_causal in (False, True):
        _assert_same(
            lambda *t, is_causal=is_causal: F.scaled_dot_product_attention(
                *t[:3], t[3] if len(t) > 3 else None, 0.0, is_causal
            ),
            tensors,
            f"3-D, {mask}, causal {is_causal}",
        )


def test_three_dimensional_grouped_query_attention(mirror_mode):
    q, k, v = (t[0] for t in _qkv(kv_heads=2))
    _assert_same(lambda q, k, v: F.scaled_dot_product_attention(q, k[:2], v[:2], enable_gqa=True), [q, k, v], "3-D gqa")


def test_the_choice_is_asked_with_the_mask_flag_kept(mirror_mode):
    """The stand-in that CPU's ``_fused_sdp_choice`` reads carries ``requires_grad``: flash (1) for a detached
    mask, math (0) for one that requires grad."""
    q, k, v = (t.detach().to("neuron") for t in _qkv())
    mask = torch.zeros(5, 7, device="neuron")
    choose = torch.ops.aten._fused_sdp_choice.default
    stand_ins = [sdpa_mirror.choice_stand_in(t) for t in (q, k, v)]
    assert all(t.device.type == "cpu" for t in stand_ins)
    assert choose(*stand_ins, sdpa_mirror.choice_stand_in(mask), 0.0, False) == sdpa_mirror.SDP_FLASH
    assert choose(*stand_ins, sdpa_mirror.choice_stand_in(mask.requires_grad_()), 0.0, False) == 0


@pytest.fixture
def fresh_dynamo():
    """Dynamo reset before and after: no cache entry, guard or recompile count of an earlier test (compiled
    in another emulator mode, say) decides what this test's ``torch.compile`` runs."""
    import torch._dynamo  # deferred: importing torch._dynamo costs ~1 s

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compile_traces_sdpa_with_fake_tensors(mirror_mode, fresh_dynamo):
    """``torch.compile`` traces the mirror kernel with FakeTensors, which have no bytes for the CPU choice's
    alias: tracing once raised "Cannot access data pointer of Tensor" (transformers' static-cache
    ``generate`` and ``test_generate_compile_model_forward_fullgraph``, a decode step: query length 1, a
    boolean padding mask). Traced, the math path runs: close to CPU (not bitwise), gradients included."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 1, 16), torch.randn(2, 2, 26, 16), torch.randn(2, 2, 26, 16)
    mask = torch.ones(2, 1, 1, 26, dtype=torch.bool)
    mask[0, ..., :3] = False

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.25)

    leaves = [t.to("neuron").requires_grad_() for t in (q, k, v)]
    out = torch.compile(fn, backend="neuron", fullgraph=True)(*leaves, mask.to("neuron"))
    grads = torch.autograd.grad(out.sum(), leaves)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = fn(*ref_leaves, mask)
    ref_grads = torch.autograd.grad(ref.sum(), ref_leaves)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), atol=1e-6, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got.cpu(), want, atol=1e-6, rtol=1e-5)


EMPTY_SHAPES = {
    "3-D, no rows": ((0, 4, 8), (0, 4, 8)),
    "3-D, empty key": ((2, 4, 8), (2, 0, 8)),
    "4-D, no heads": ((1, 0, 4, 8), (1, 0, 4, 8)),
    "4-D, empty query": ((1, 2, 0, 8), (1, 2, 4, 8)),
    "4-D, empty head dim": ((1, 2, 4, 0), (1, 2, 4, 0)),
}


@pytest.mark.parametrize("shapes", list(EMPTY_SHAPES))
def test_empty_inputs_follow_the_cpu_composite(mirror_mode, shapes):
    """An empty query, key or value: the CPU composite answers zeros plus the inputs' sums times 0 before it
    chooses a kernel (the CPU flash kernel divides by zero on a zero-head input, SIGFPE); the device gives the
    same values (NaN where an input holds infinity) and gradients, in every causal setting."""
    q_shape, kv_shape = EMPTY_SHAPES[shapes]
    q = torch.randn(q_shape, requires_grad=True)
    if q.numel():
        with torch.no_grad():
            q.view(-1)[0] = float("inf")
    k, v = (torch.randn(kv_shape, requires_grad=True) for _ in range(2))
    for is_causal in (False, True):
        _assert_same(
            lambda q, k, v, c=is_causal: F.scaled_dot_product_attention(q, k, v, is_causal=c).nan_to_num(7.0),
            [q, k, v],
            f"{shapes}, causal {is_causal}",
        )
