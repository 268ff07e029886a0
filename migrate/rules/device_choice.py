"""NM117: a script's device choice, an ``if``/``elif``/``else`` chain over CUDA, MPS, XPU and the CPU.

The most common way a script picks its device::

    use_cuda = not args.no_cuda and torch.cuda.is_available()
    use_mps = not args.no_mps and torch.backends.mps.is_available()
    if use_cuda:
        device = torch.device("cuda")
    elif use_mps:
        device = torch.device("mps")
    else:
        device = torch.device("cpu")

Every branch only assigns one device to the same name, and the last one is the CPU: the script asks for the
best device present, which is what ``torch.accelerator.current_accelerator()`` answers. Whether a chain is
such a choice is decided by what its branches do (:func:`device_choice`), not by the names in its tests: a
chain whose branches do anything else (call per-vendor APIs, pick per-vendor backends) is per-vendor dispatch
and stays with the exemptions (:mod:`neuron_conformance.migrate.exemptions.vendor_dispatch`).

The fix keeps the CUDA branch's test, so the user's switch (``--cuda``, ``--no-cuda``) now means "use an
accelerator", assigns the accelerator's device there, and drops the other vendors' branches. A dropped
branch whose test only probes its vendor's availability (``use_mps = ... torch.backends.mps.is_available()``)
is covered by the widened CUDA test (``torch.accelerator.is_available()`` is true on MPS too) and its flag's
assignment goes when nothing else reads it; a dropped branch tested by a switch of the user's own
(``elif args.mps:``) has its test or-ed into the new one, so that switch still asks for an accelerator.
"""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.choice import choices_in, cuda_probe, derived_type_operand, rewrite
from neuron_conformance.migrate.hooks import on_node, rule
from neuron_conformance.migrate.reach import guard_region
from neuron_conformance.migrate.rules._common import UNSAFE, Finding

rule(
    "NM117",
    "device-choice-chain",
    "Device chosen by a chain over `{vendors}`; other accelerators fall back to the CPU",
    "Choose the current accelerator, with the CPU as fallback",
    UNSAFE,
    min_torch=(2, 6),
    what="Finds a device choice written as an `if`/`elif`/`else` chain whose branches each only assign "
    "`torch.device(...)` (or a device string) of CUDA, MPS or XPU to the same name, with the CPU last.",
    why="The chain names the vendors its author had; on Trainium (or any accelerator it does not name) the "
    "script runs on the CPU. pytorch/examples replaced these chains with "
    "`torch.accelerator.current_accelerator()`.",
    example='if use_cuda:\n    device = torch.device("cuda")\nelif use_mps:\n    device = torch.device("mps")\n'
    'else:\n    device = torch.device("cpu")',
    use_instead='if use_cuda:\n    device = torch.device(DEVICE_TYPE)\nelse:\n    device = torch.device("cpu")',
    fix_safety="Unsafe. The CUDA branch's test is kept (its `torch.cuda.is_available()` widened), so the "
    "user's switch now means 'use an accelerator'. The other vendors' branches are dropped: their "
    "availability probes are covered by the widened test (the probe flag's assignment is removed when "
    "nothing else reads it); a test of the user's own switch (`elif args.mps:`) is or-ed into the kept "
    "test. On an MPS or XPU host a run that had switched CUDA off but left MPS on (`--no-cuda`) now "
    "runs on the CPU. A flag that feeds the chain (`use_cuda = ... torch.cuda.is_available()`) is NM101's "
    "and is widened with it: the chain is fixed only when that flag is (checks that place values are "
    "widened together).",
    references="`torch/accelerator/__init__.py` (`current_accelerator`); pytorch/examples 65722fe (mnist), "
    "54e132e (vae), cc8e404 (dcgan): the maintainers' own migration of these chains.",
)


def _block_finding(ctx, node):
    body = node.body
    if not any(isinstance(s, cst.If) for s in body):
        return None
    found = choices_in(ctx, body)
    if not found:
        return None
    out = []
    for index, choice in found:
        target, cuda_code = choice.target, ctx.code(choice.cuda_test)
        vendors = ", ".join(["cuda"] + sorted({v for _, v in choice.others}) + ["cpu"])

        def fix(updated, target=target, cuda_code=cuda_code):
            for i, c in choices_in(ctx, updated.body):
                if c.target == target and cst.Module([]).code_for_node(c.cuda_test).strip() == cuda_code:
                    return updated.with_changes(body=rewrite(ctx, list(updated.body), i, c, ctx.source))
            return None

        finding = Finding("NM117", choice.node, {"vendors": vendors}, fix, UNSAFE, fix_on_parent=True)
        probe = cuda_probe(ctx, body, index, choice)  # the chain is fixed only as far as that widening is
        finding.guard = None if probe is None else guard_region(ctx, probe)
        out.append(finding)
    return out


@on_node("IndentedBlock")
def _choice_in_block(ctx, node):
    return _block_finding(ctx, node)


@on_node("Module")
def _choice_in_module(ctx, node):
    return _block_finding(ctx, node)


rule(
    "NM118",
    "cuda-bf16-choice",
    "bfloat16 chosen only when CUDA supports it; other accelerators get `{other}`",
    "Ask the current accelerator whether it supports bfloat16",
    UNSAFE,
    min_torch=(2, 8),
    what="Finds a dtype chosen by `torch.cuda.is_available() and torch.cuda.is_bf16_supported()` (a conditional "
    "expression or an `if`/`else` whose branches name dtypes, one of them bfloat16).",
    why="On Trainium, XPU or MPS the test is False, so the script silently trains in the other dtype (usually "
    "float16, with a loss scaler) although the device supports bfloat16.",
    example="dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'",
    use_instead="dtype = 'bfloat16' if torch.accelerator.is_available() and torch.bfloat16 in "
    "torch.accelerator.get_device_capability()[\"supported_dtypes\"] else 'float16'",
    fix_safety="Unsafe: `supported_dtypes` says bfloat16 tensors can be made and used on the device, not that they "
    "are fast; `torch.cuda.is_bf16_supported()` also answers for emulated bfloat16 on older GPUs, so on CUDA "
    "the choice is the same in practice. On a CPU-only host both tests are False.",
    references="`torch/accelerator/__init__.py` (`get_device_capability`, its `supported_dtypes`); "
    "karpathy/nanoGPT `train.py` (the idiom).",
)

_DTYPE_WORDS = ("bfloat16", "float16", "float32", "half", "bf16", "fp16", "fp32")


def _dtype_branch(node) -> str:
    """The dtype word a branch value names (``'bfloat16'``, ``torch.float16``), or ""."""
    text = node.value if isinstance(node, cst.SimpleString) else ""
    if isinstance(node, cst.Attribute):
        text = node.attr.value
    return next((w for w in _DTYPE_WORDS if w in text.strip("'\"").lower()), "")


def _bf16_test(ctx, test):
    """``(availability call, capability call)`` when ``test`` is ``torch.cuda.is_available() and
    torch.cuda.is_bf16_supported(...)``, else None."""
    if not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)):
        return None
    left, right = test.left, test.right
    if (
        isinstance(left, cst.Call)
        and isinstance(right, cst.Call)
        and ctx.qname(left.func) == "torch.cuda.is_available"
        and ctx.qname(right.func) == "torch.cuda.is_bf16_supported"
        and not left.args
    ):
        return left, right
    return None


def _bf16_words(ctx, node):
    """The dtype words of the two branches of a bfloat16 choice (:func:`_bf16_test`), or None."""
    if _bf16_test(ctx, node.test) is None:
        return None
    words = [_dtype_branch(node.body), _dtype_branch(node.orelse)]
    if not all(words) or not any(w in ("bfloat16", "bf16") for w in words):
        return None
    return words


@on_node("visit:IfExp")
def _bf16_parts(ctx, node):
    """The test's own calls are this rule's: not reported again by NM101/NM116."""
    if _bf16_words(ctx, node) is not None:
        ctx.skip.update(id(n) for n in _bf16_test(ctx, node.test))


@on_node("IfExp")
def _bf16_choice(ctx, node):
    words = _bf16_words(ctx, node)
    if words is None:
        return None

    def fix(updated):
        t = ctx.torch_name
        ctx.torch_attr("accelerator")
        text = f'{t}.bfloat16 in {t}.accelerator.get_device_capability()["supported_dtypes"]'
        return updated.with_changes(
            test=updated.test.with_changes(
                left=cst.parse_expression(f"{t}.accelerator.is_available()"), right=cst.parse_expression(text)
            )
        )

    other = words[1] if words[0] in ("bfloat16", "bf16") else words[0]
    return Finding("NM118", node, {"other": other}, fix, UNSAFE)


rule(
    "NM119",
    "cuda-derived-device-type",
    'Device type derived as `"cuda"` or `"cpu"`; every other accelerator gets `"cpu"`',
    "Replace with `torch.device(...).type`",
    UNSAFE,
    what='Finds `"cuda" if "cuda" in device else "cpu"` (or `device.startswith("cuda")`): the device type of a '
    "device name, written for CUDA only.",
    why="Once the device is an accelerator's, the derived type still says `cpu`, so autocast, pinned memory "
    "and fused optimizers that follow it are switched off there (nanoGPT's `device_type`).",
    example="device_type = 'cuda' if 'cuda' in device else 'cpu'",
    use_instead="device_type = torch.device(device).type",
    fix_safety='Unsafe: on MPS or XPU the type is now that device\'s, not `"cpu"`, so what follows it (autocast, '
    "`pin_memory`) is turned on there. On CUDA and on the CPU the value is the same.",
    references="`torch/csrc/Device.cpp` (`torch.device(str).type`); karpathy/nanoGPT `train.py`, `sample.py`.",
)


@on_node("visit:IfExp")
def _derived_parts(ctx, node):
    """The test's comparison is this rule's: not reported again by NM111."""
    if derived_type_operand(node) is not None:
        ctx.skip.add(id(node.test))


@on_node("IfExp")
def _derived_type(ctx, node):
    operand = derived_type_operand(node)
    if operand is None:
        return None

    def fix(updated):
        value = derived_type_operand(updated)
        if value is None:
            return None
        return cst.Attribute(cst.Call(ctx.torch_attr("device"), [cst.Arg(value)]), cst.Name("type"))

    return Finding("NM119", node, fix=fix, applicability=UNSAFE)
