"""NM4xx: random number generation (``torch/random.py``)."""

from __future__ import annotations

import libcst as cst

from neuron_conformance.migrate.hooks import on_call, on_node, on_reference, rule
from neuron_conformance.migrate.rules._common import SAFE, UNSAFE, Finding, new_call

rule(
    "NM401",
    "redundant-cuda-seed",
    "`{name}` repeats the `torch.manual_seed` call next to it",
    "Remove the redundant call",
    SAFE,
    what="Finds `torch.cuda.manual_seed(s)` / `manual_seed_all(s)` statements in a block that also "
    "calls `torch.manual_seed(s)` with the same argument text.",
    why="`torch.manual_seed` already seeds CUDA, MPS, XPU, MTIA and the PrivateUse1 device.",
    example="torch.manual_seed(seed)\ntorch.cuda.manual_seed_all(seed)",
    use_instead="torch.manual_seed(seed)",
    fix_safety="Safe: the generators end in the same state (`torch/random.py` `manual_seed`).",
    references="`torch/random.py` (`manual_seed`).",
)

rule(
    "NM402",
    "cuda-manual-seed",
    "`{name}` seeds CUDA only",
    "Replace with `torch.manual_seed(...)`",
    UNSAFE,
    what="Finds `torch.cuda.manual_seed`, `manual_seed_all`, `seed` and `seed_all` with no matching "
    "`torch.manual_seed` in the same block.",
    why="The accelerator in use is not seeded, so runs are not reproducible there.",
    example="torch.cuda.manual_seed_all(1234)",
    use_instead="torch.manual_seed(1234)",
    fix_safety="Unsafe: `torch.manual_seed` also reseeds the CPU generator, which changes the CPU random "
    "stream. `torch.get_device_module().manual_seed_all` would not, but MPS lacks it.",
    references="`torch/random.py`.",
)

rule(
    "NM403",
    "cuda-rng-state",
    "`{name}` reads or writes the CUDA generator only",
    "Replace with `torch.get_device_module().{attr}`",
    UNSAFE,
    what="Finds `torch.cuda.get_rng_state`, `set_rng_state`, their `_all` forms and `initial_seed`.",
    why="Checkpoints that save only the CUDA generator state do not restore the accelerator's.",
    example="state = torch.cuda.get_rng_state()",
    use_instead="state = torch.get_device_module().get_rng_state()",
    fix_safety="Unsafe: `torch.get_device_module()` is the current accelerator's module (or `torch.cpu` "
    "on CPU-only hosts, which lacks these); MPS lacks the `_all` variants.",
    references="`torch/random.py`; `torch/__init__.py` (`get_device_module`; the per-device modules' attributes).",
)

rule(
    "NM404",
    "cuda-default-generators",
    "`torch.cuda.default_generators` is CUDA-specific",
    "",
    "report",
    what="Finds `torch.cuda.default_generators`.",
    why="Other accelerators keep their generators elsewhere.",
    example="g = torch.cuda.default_generators[0]",
    use_instead="g = torch.Generator(device=DEVICE_TYPE)",
    fix_safety="No fix.",
    references="`torch/random.py`.",
)


# NM401 state: per enclosing block (module, then indented blocks, innermost last), the argument
# texts of the `torch.manual_seed(x)` statements directly in it.
def _seed_stack(ctx) -> list:
    return ctx.rule_state(__name__, lambda: [set()])


def _push_seeds(ctx, body) -> None:
    seeds = set()
    for stmt in body:
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.Call)
        ):
            call = stmt.body[0].value
            if ctx.qname(call.func) == "torch.manual_seed" and len(call.args) == 1:
                seeds.add(ctx.code(call.args[0].value))
    _seed_stack(ctx).append(seeds)


@on_node("visit:Module")
def _enter_module(ctx, node):
    _push_seeds(ctx, node.body)


@on_node("visit:IndentedBlock")
def _enter_block(ctx, node):
    _push_seeds(ctx, node.body)


@on_node("IndentedBlock")
def _leave_block(ctx, node):
    _seed_stack(ctx).pop()


@on_call("torch.cuda.manual_seed", "torch.cuda.manual_seed_all")
def _seed(ctx, call, q):
    name = q
    if len(call.args) == 1 and not call.args[0].star:
        arg_code = ctx.code(call.args[0].value)
        if ctx.stmt_call_id == id(call) and arg_code in _seed_stack(ctx)[-1]:

            def remove(line):
                return cst.RemoveFromParent()

            return Finding("NM401", call, {"name": name}, fix=remove, applicability=SAFE, stmt_fix=True)
    fix = new_call(ctx, call, "manual_seed", old_params=["seed"], new_positional=["seed"])
    return Finding("NM402", call, {"name": name}, fix=fix, applicability=UNSAFE if fix else "report")


@on_call("torch.cuda.seed", "torch.cuda.seed_all")
def _seed_random(ctx, call, q):
    fix = new_call(ctx, call, "seed") if not call.args else None
    return Finding("NM402", call, {"name": q}, fix=fix, applicability=UNSAFE if fix else "report")


_STATE = ("get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "initial_seed")


@on_call(*[f"torch.cuda.{n}" for n in _STATE])
def _state(ctx, call, q):
    attr = q.rsplit(".", 1)[1]
    head = ctx.head_name(call.func)

    def fix(updated):
        ctx.rewritten_heads.add(head)
        func = cst.Attribute(value=cst.Call(func=ctx.torch_attr("get_device_module")), attr=cst.Name(attr))
        return updated.with_changes(func=func)

    return Finding("NM403", call, {"name": q, "attr": attr}, fix=fix, applicability=UNSAFE)


@on_reference("torch.cuda.default_generators")
def _default_generators(ctx, node, q):
    return Finding("NM404", node)
