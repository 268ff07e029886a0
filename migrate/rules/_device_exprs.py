"""What the NM1xx rules (:mod:`neuron_conformance.migrate.rules.device`,
:mod:`neuron_conformance.migrate.rules.placement`) ask about device expressions: the device-selection
ternary, device-index arguments, device-named variables, evidence that an operand is a device, legacy
CUDA tensor types. Pure functions of a node and the
:class:`~neuron_conformance.migrate.context.Context`; nothing is registered here."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.traversal import walk_in_scope

TERNARY_TESTS = {"torch.cuda.is_available", "torch.backends.mps.is_available", "torch.xpu.is_available"}
CUDA_ONLY_PREFIXES = (
    "torch.cuda.nvtx",
    "torch.backends.cudnn",
    "torch.backends.cuda",
    "torch.cuda.CUDAGraph",
    "torch.cuda.graph",
    "torch.cuda.make_graphed_callables",
    "torch.version.cuda",
    "torch.utils.cpp_extension",
    "torch.cuda.jiterator",
    "torch.cuda.nccl",
    "torch.cuda.get_device_capability",
    "torch.cuda.get_device_properties",
    "torch.cuda.memory_summary",
    "torch.cuda.default_stream",
    "torch.cuda.ExternalStream",
    "torch.cuda.set_per_process_memory_fraction",
    "torch.cuda.ipc_collect",
    "torch.cuda.is_bf16_supported",
    "torch.cuda.tunable",
    "torch.cuda._sleep",
)


def ternary_kind(ctx, node):
    """'str' / 'device' when ``node`` is the device-selection ternary, else None."""
    if not isinstance(node, cst.IfExp) or not isinstance(node.test, cst.Call) or node.test.args:
        return None
    if ctx.qname(node.test.func) != "torch.cuda.is_available":
        return None
    kinds = set()
    cur = node
    while isinstance(cur, cst.IfExp):
        if not isinstance(cur.test, cst.Call) or ctx.qname(cur.test.func) not in TERNARY_TESTS or cur.test.args:
            return None
        kinds.add(leaf_kind(ctx, cur.body, ("cuda", "mps", "xpu")))
        cur = cur.orelse
    kinds.add(leaf_kind(ctx, cur, ("cpu",)))
    if None in kinds or len(kinds) != 1:
        return None
    return kinds.pop()


def leaf_kind(ctx, node, allowed):
    v = string_value(node)
    if v in allowed:
        return "str"
    if (
        isinstance(node, cst.Call)
        and ctx.qname(node.func) == "torch.device"
        and len(node.args) == 1
        and string_value(node.args[0].value) in allowed
        and node.args[0].keyword is None
    ):
        return "device"
    return None


def index_expr(ctx, node):
    """An int-valued replacement for a device argument, or None when unknown/unsafe."""
    v = string_value(node)
    if v is not None:
        if v.startswith("cuda:") and v[5:].isdigit():
            return cst.Integer(v[5:])
        return None
    if isinstance(node, cst.Call) and ctx.qname(node.func) == "torch.device":
        return None
    return node


def provably_torch(ctx, node) -> bool:
    if isinstance(node, cst.Call):
        q = ctx.qname(node.func)
        return q is not None and q.startswith("torch.") and not q.startswith("torch.cuda")
    return False


CUDA_METHOD_KEYWORDS = frozenset({"device", "non_blocking", "memory_format"})


def enclosing_function(ctx, node) -> Optional[cst.FunctionDef]:
    cur = ctx.parent(node)
    while cur is not None and not isinstance(cur, cst.FunctionDef):
        cur = ctx.parent(cur)
    return cur


def self_with_own_to(ctx, call: cst.Call) -> bool:
    """The receiver of ``call`` (``x.cuda()``) is the instance (the first parameter of the enclosing method,
    or a name assigned from it) inside a class that defines its own ``to`` method: ``self.to(...)`` would
    call that method, not ``Module.to`` / ``Tensor.to`` (and recurse when the call is inside it)."""
    recv = call.func.value if isinstance(call.func, cst.Attribute) else None
    if not isinstance(recv, cst.Name):
        return False
    cur, funcs = ctx.parent(call), []
    while cur is not None and not isinstance(cur, cst.ClassDef):
        if isinstance(cur, cst.FunctionDef):
            funcs.append(cur)
        cur = ctx.parent(cur)
    if cur is None or not funcs or not isinstance(cur.body, cst.IndentedBlock):
        return False
    params = funcs[-1].params.posonly_params or funcs[-1].params.params
    if not params:
        return False
    names = {params[0].name.value}
    for f in reversed(funcs):  # `me = self` in the method or a function nested in it
        for n in walk_in_scope(f):
            if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value in names:
                names |= {t.target.value for t in n.targets if isinstance(t.target, cst.Name)}
    return recv.value in names and any(isinstance(s, cst.FunctionDef) and s.name.value == "to" for s in cur.body.body)


def device_named(name: str) -> bool:
    n = name.lower()
    return (
        n == "device"
        or n.endswith("_device")
        or n.startswith("device_")
        and n != "device_type"
        or n in ("dev", "map_location")
    )


def cuda_literal(node) -> bool:
    v = string_value(node)
    return v is not None and (v == "cuda" or v.startswith("cuda:"))


DEVICE_TOKENS = frozenset({"device", "devices", "dev", "accelerator", "devicetype", "dtype_device"})


def device_word(name: str) -> bool:
    """``device``, ``dev``, ``device_type``, ``target_device``, ``device_types_set``, ``map_location``..."""
    n = name.lower().lstrip("_")
    return n == "map_location" or any(tok in DEVICE_TOKENS for tok in n.split("_"))


def device_evidence(ctx, node, depth: int = 0) -> bool:
    """Whether the other operand of a comparison with ``"cuda"`` is evidently a device or device
    type: ``x.type`` / ``x.device_type`` / a device-named variable or attribute, ``str()`` or
    ``.lower()`` of one, ``kwargs["device"]``, or a call to a function whose name mentions devices
    (``get_device_type()``, ``torch.get_default_device()``)."""
    if depth > 4:
        return False
    if isinstance(node, cst.Name):
        return device_word(node.value)
    if isinstance(node, cst.Attribute):
        return node.attr.value == "type" or device_word(node.attr.value)
    if isinstance(node, cst.Subscript):
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = string_value(node.slice[0].slice.value)
            if key is not None and device_word(key):
                return True
        return device_evidence(ctx, node.value, depth + 1)
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("str", "repr") and len(node.args) == 1:
            return device_evidence(ctx, node.args[0].value, depth + 1)
        if isinstance(func, cst.Attribute) and func.attr.value in ("lower", "strip", "casefold") and not node.args:
            return device_evidence(ctx, func.value, depth + 1)
        name = (
            func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
        )
        return "device" in name.lower() or "accelerator" in name.lower()
    return False


LEGACY = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64",
    "IntTensor": "int32",
    "ShortTensor": "int16",
    "CharTensor": "int8",
    "ByteTensor": "uint8",
    "BoolTensor": "bool",
}


def legacy_dtype(q):
    if q and q.startswith("torch.cuda.") and q[len("torch.cuda.") :] in LEGACY:
        return LEGACY[q[len("torch.cuda.") :]]
    return None
