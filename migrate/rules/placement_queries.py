"""The NM113-NM116 handlers of the placement family (:mod:`.placement` declares the rules and their docs):
legacy CUDA tensor types (``torch.cuda.FloatTensor``, ``.type(...)``), ``pin_memory`` on them, and the CUDA
device-module queries (device name, initialisation, properties, capability).

Loaded right after :mod:`.placement` (``neuron_conformance.migrate.registry.RULE_MODULES``), so the handlers
register in the order they had when both lived in one module."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.args import build_args, int_literal, string_value
from neuron_conformance.migrate.hooks import on_call, on_method, on_node, on_reference
from neuron_conformance.migrate.reach import value_region
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding
from neuron_conformance.migrate.rules._device_exprs import LEGACY, cuda_literal, legacy_dtype


# ------------------------------------------------------------------ NM113 legacy types
@on_call(*[f"torch.cuda.{n}" for n in LEGACY])
def _legacy_ctor(ctx, call, q):
    dtype = legacy_dtype(q)
    name = q.rsplit(".", 1)[1]
    args = call.args
    if any(a.keyword is not None or a.star for a in args):
        return Finding("NM113", call, {"name": name})
    if args and all(int_literal(a.value) is not None for a in args):
        factory = "empty"
    elif len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple)):
        factory = "tensor"
    else:
        return Finding("NM113", call, {"name": name})

    def fix(updated):
        return cst.Call(
            func=ctx.torch_attr(factory),
            args=build_args(
                [a.value for a in updated.args], [("dtype", ctx.torch_attr(dtype)), ("device", ctx.device_type())]
            ),
        )

    return Finding("NM113", call, {"name": name}, fix=fix, applicability=SAFE)


@on_node("visit:Call")
def _mark_type_arg(ctx, call):
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "type" and len(call.args) == 1:
        ctx.skip.add(id(call.args[0].value))


@on_method("type")
def _type_method(ctx, call):
    if len(call.args) != 1 or call.args[0].keyword is not None:
        return None
    arg = call.args[0].value
    sv = string_value(arg)
    dtype = legacy_dtype(sv if sv else ctx.qname(arg))
    if dtype is None:
        return None

    def fix(updated):
        return updated.with_changes(
            func=updated.func.with_changes(attr=cst.Name("to")),
            args=build_args([ctx.device_type(), ctx.torch_attr(dtype)], []),
        )

    return Finding("NM113", call, {"name": (sv or ctx.qname(arg)).rsplit(".", 1)[1]}, fix=fix, applicability=SAFE)


@on_reference(*[f"torch.cuda.{n}" for n in LEGACY])
def _legacy_ref(ctx, node, q):
    return Finding("NM113", node, {"name": q.rsplit(".", 1)[1]})


@on_method("pin_memory")
def _pin_memory(ctx, call):
    if len(call.args) == 1 and cuda_literal(call.args[0].value):
        return Finding("NM114", call, fix=lambda updated: updated.with_changes(args=[]), applicability=SAFE)
    return None


# ------------------------------------------------------------------ NM115/NM116
@on_call("torch.cuda.get_device_name", "torch.cuda.is_initialized", "torch.cuda.init")
def _device_module_fn(ctx, call, q):
    attr = q.rsplit(".", 1)[1]

    def fix(updated):
        ctx.rewritten_heads.add(ctx.head_name(call.func))
        func = cst.Attribute(value=cst.Call(func=ctx.torch_attr("get_device_module")), attr=cst.Name(attr))
        return updated.with_changes(func=func)

    return Finding(
        "NM115", call, {"name": q, "attr": attr}, fix=fix, applicability=UNSAFE, guard=value_region(ctx, call)
    )  # limited by where the name goes (migrate/reach.py)


@on_call("torch.cuda.get_device_properties")
def _props(ctx, call, q):
    return Finding("NM115", call, {"name": q, "attr": "get_device_properties"})


@on_call(
    "torch.cuda.get_device_capability",
    "torch.cuda.is_bf16_supported",
    "torch.cuda.get_arch_list",
    "torch.cuda.is_tf32_supported",
)
def _capability(ctx, call, q):
    return Finding("NM116", call, {"name": q})


@on_reference("torch.cuda.get_device_capability", "torch.cuda.is_bf16_supported")
def _capability_ref(ctx, node, q):
    return Finding("NM116", node, {"name": q})
