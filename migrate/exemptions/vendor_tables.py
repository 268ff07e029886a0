"""Per-vendor tables, displays, flags and functions: the CUDA entry of something the author wrote once per
accelerator.

* **a literal list of accelerators**: ``("cuda", "xpu")`` (:func:`vendor_list`, used by the placement
  rules: the supported accelerators, listed by name).
* **the default of a per-vendor table** (:func:`vendor_table_default`): ``{"npu": "hccl", "xpu":
  "xccl"}.get(kind, "nccl" if dist.is_nccl_available() else "gloo")``: a dict literal keyed only by other
  vendors' device types; the default is the table's CUDA entry. A table keyed by anything else is still
  reported.
* **a per-device table entry chosen for its vendor** (:func:`vendor_guarded_entry`): ``if
  is_torch_xla_available(): BACKEND_EMPTY_CACHE["xla"] = torch.cuda.empty_cache`` (XLA on GPUs uses
  CUDA's functions). The same entry without that test is still reported.
* **per-vendor sibling functions** (:func:`vendor_sibling_function`): a function whose name has the word
  ``cuda`` (``get_max_cuda_memory``) next to a function of the same scope whose name is the same with
  another vendor's word in its place (``get_max_musa_memory``). A function named for CUDA with no such
  sibling (``def to_cuda(batch)``) is still reported.
* **per-vendor display elements** (:func:`vendor_display_element`): the CUDA element of a list, tuple or
  set display whose other elements name another vendor (``{ProfilerActivity.CPU, ProfilerActivity.CUDA,
  ProfilerActivity.XPU}``). A display naming no other vendor is still reported.
* **per-vendor flags** (:func:`vendor_flag_branch`): the body of ``if cuda:`` (a name or attribute whose
  words include ``cuda``: ``use_cuda``, ``self.cuda``) next to ``if xpu:`` in the same block (three
  statements either way). A flag with no sibling for another vendor is still reported.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from neuron_conformance.migrate.args import string_value
from neuron_conformance.migrate.exemptions.blocks import block_statements
from neuron_conformance.migrate.exemptions.names import (
    OTHER_VENDOR,
    key_vendor,
    names_in,
    names_other_vendor,
    path_pairs,
)
from neuron_conformance.migrate.exemptions.registry import FINDING, STEP, exemption


def vendor_list(node: cst.CSTNode) -> bool:
    """``("cuda", "xpu")``: a literal tuple/list/set of strings naming CUDA and another accelerator."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return False
    values = [string_value(e.value) for e in node.elements]
    return "cuda" in values and any(v is not None and v != "cuda" and OTHER_VENDOR.search(v) for v in values)


def vendor_table_default(ctx, call: cst.Call, child) -> bool:
    """``child`` is the default argument of ``{<other vendors>: ...}.get(key, default)``."""
    if not (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "get"
        and len(call.args) == 2
        and call.args[1] is child
        and isinstance(call.func.value, cst.Dict)
        and call.func.value.elements
    ):
        return False
    keys = [string_value(e.key) for e in call.func.value.elements if isinstance(e, cst.DictElement)]
    return len(keys) == len(call.func.value.elements) and all(k and OTHER_VENDOR.search(k) for k in keys)


def vendor_guarded_entry(ctx, path: list) -> bool:
    """``if is_torch_xla_available(): BACKEND_EMPTY_CACHE["xla"] = torch.cuda.empty_cache``: the value
    stored under another accelerator's key of a per-device table, in the body of a test naming that
    same accelerator, was chosen for it (XLA on GPUs uses CUDA's functions). The same entry without
    that test is still reported."""
    assign = next((a for a in path if isinstance(a, cst.Assign)), None)
    if assign is None:
        return False
    vendors = {key_vendor(t.target).lower() for t in assign.targets} - {""}
    if not vendors:
        return False
    for a, child in path_pairs(path):
        if isinstance(a, cst.If) and child is a.body:
            named = {n.lower() for n in names_in(a.test)}
            if any(v in w.split("_") or v == w for v in vendors for w in named):
                return True
    return False


_VENDOR_WORDS = ("xpu", "npu", "mps", "mlu", "hpu", "musa", "neuron", "xla", "tpu", "mtia", "sdaa", "gcu", "dipu")


def _words(name: str) -> list:
    return [w for w in re.split(r"_+", name.lower()) if w]


def _vendor_variants(name: str) -> set:
    """``get_cuda_device`` -> {``get_xpu_device``, ``get_mps_device``, ...}: the name with its word ``cuda``
    replaced by each other vendor's word (empty when ``cuda`` is not one of its words)."""
    words = _words(name)
    if "cuda" not in words:
        return set()
    return {"_".join(v if w == "cuda" else w for w in words) for v in _VENDOR_WORDS}


def vendor_sibling_function(ctx, func: cst.FunctionDef, scope) -> bool:
    """``func`` (an element of ``scope``'s body) is named for CUDA and ``scope`` defines the same
    name for another vendor."""
    variants = _vendor_variants(func.name.value)
    if not variants or not isinstance(scope, (cst.IndentedBlock, cst.Module)):
        return False
    names = {"_".join(_words(st.name.value)) for st in scope.body if isinstance(st, cst.FunctionDef) and st is not func}
    return bool(variants & names)


def vendor_display_element(ctx, display, element) -> bool:
    """``element`` of the list/tuple/set ``display`` names CUDA, and another element names another
    vendor and not CUDA."""
    if not isinstance(display, (cst.List, cst.Tuple, cst.Set)) or not isinstance(element, cst.Element):
        return False

    def cuda(e):
        return any(w == "cuda" for n in names_in(e) for w in _words(n.replace(".", "_")))

    return cuda(element) and any(e is not element and names_other_vendor(e) and not cuda(e) for e in display.elements)


def _flag_vendor(test) -> Optional[str]:
    """``cuda`` for ``if use_cuda:``/``if self.cuda:``, ``xpu`` for ``if xpu:``: the vendor word of a test
    that is a plain name or attribute, else None."""
    if isinstance(test, cst.Attribute):
        test = test.attr
    if not isinstance(test, cst.Name):
        return None
    words = _words(test.value)
    return "cuda" if "cuda" in words else next((w for w in words if w in _VENDOR_WORDS), None)


def vendor_flag_branch(ctx, block, stmt, child) -> bool:
    """``stmt`` (in ``block``) is ``if <cuda flag>:``, ``child`` is its body, and a statement next to
    it is ``if <another vendor's flag>:``."""
    if not isinstance(stmt, cst.If) or child is not stmt.body or _flag_vendor(stmt.test) != "cuda":
        return False
    body = list(block_statements(block))
    i = next((k for k, st in enumerate(body) if st is stmt), None)
    if i is None:
        return False
    return any(
        isinstance(sib, cst.If) and _flag_vendor(sib.test) not in (None, "cuda")
        for sib in body[max(0, i - 3) : i + 4]
        if sib is not stmt
    )


# ----------------------------------------------------------------------------- registered exemptions
@exemption(
    "default of a per-vendor table",
    scope=STEP,
    group="arms",
    code="NM602",
    quiet=(
        "import torch.distributed as dist\ndef backend(kind):\n    return {'npu': 'hccl', 'xpu': 'xccl'}"
        ".get(kind, 'nccl' if dist.is_nccl_available() else 'gloo')\n"
    ),
    near_miss=(
        "import torch.distributed as dist\ndef backend(kind):\n"
        "    return {'fast': 'x'}.get(kind, 'nccl' if dist.is_nccl_available() else 'gloo')\n"
    ),
)
def _vendor_table_default(view, i: int) -> bool:
    """The default argument of ``{<other vendors>: ...}.get(key, default)`` (:func:`vendor_table_default`):
    the table's CUDA entry, as in a vendor chain."""
    a = view.full[i]
    return isinstance(a, cst.Call) and vendor_table_default(view.ctx, a, view.full[i + 1])


@exemption(
    "per-vendor display element",
    scope=STEP,
    group="arms",
    code="NM201",
    quiet=("import torch\nSYNCS = [torch.xpu.synchronize, torch.cuda.synchronize]\n"),
    near_miss="import torch\nSYNCS = [print, torch.cuda.synchronize]\n",
)
def _vendor_display_element(view, i: int) -> bool:
    """The CUDA element of a list, tuple or set display whose other elements name another vendor
    (:func:`vendor_display_element`)."""
    a = view.full[i]
    return isinstance(a, (cst.List, cst.Tuple, cst.Set)) and vendor_display_element(view.ctx, a, view.full[i + 1])


@exemption(
    "per-vendor sibling function",
    scope=STEP,
    group="arms",
    code="NM403",
    quiet=(
        "import torch\ndef get_cuda_rng():\n    return torch.cuda.get_rng_state()\n"
        "def get_xpu_rng():\n    return torch.xpu.get_rng_state()\n"
    ),
    near_miss="import torch\ndef get_cuda_rng():\n    return torch.cuda.get_rng_state()\n",
)
def _vendor_sibling_function(view, i: int) -> bool:
    """A function named for CUDA next to the same function named for another vendor
    (:func:`vendor_sibling_function`): the CUDA one's contract is CUDA."""
    a, child = view.full[i], view.full[i + 1]
    return (
        isinstance(a, (cst.IndentedBlock, cst.Module))
        and isinstance(child, cst.FunctionDef)
        and vendor_sibling_function(view.ctx, child, a)
    )


@exemption(
    "per-vendor flag",
    scope=STEP,
    group="arms",
    code="NM201",
    quiet=(
        "import torch\ndef sync(use_cuda, use_xpu):\n    if use_cuda:\n        torch.cuda.synchronize()\n"
        "    if use_xpu:\n        torch.xpu.synchronize()\n"
    ),
    near_miss="import torch\ndef sync(use_cuda):\n    if use_cuda:\n        torch.cuda.synchronize()\n",
)
def _vendor_flag_branch(view, i: int) -> bool:
    """The body of ``if <cuda flag>:`` next to ``if <another vendor's flag>:`` (:func:`vendor_flag_branch`)."""
    full = view.full
    return (
        isinstance(full[i], (cst.IndentedBlock, cst.Module))
        and i + 2 < len(full)
        and vendor_flag_branch(view.ctx, full[i], full[i + 1], full[i + 2])
    )


@exemption(
    "per-device table entry under its vendor's test",
    scope=FINDING,
    code="NM201",
    quiet="import torch\nSYNC = {}\nif has_npu():\n    SYNC['npu'] = torch.cuda.synchronize\n",
    near_miss="import torch\nSYNC = {}\nif has_npu():\n    SYNC['mps'] = torch.cuda.synchronize\n",
)
def _vendor_guarded_entry(view) -> bool:
    """The value stored under another accelerator's key of a per-device table, in the body of a test
    naming that same accelerator (:func:`vendor_guarded_entry`): it was chosen for that accelerator."""
    return vendor_guarded_entry(view.ctx, view.path)
