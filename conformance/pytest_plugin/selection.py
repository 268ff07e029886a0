"""Which tests run and what each one checks: identities, ``--conformance-ops``, shards and the manifests' xfails.

A test's *identity* is what its result record and the expected-failure manifest match on: ``suite``,
``kind``, ``op``, ``dtype``, ``variant``. Suites give it with the ``conformance`` marker
(``pytest.mark.conformance(op=..., dtype=..., variant=..., suite=..., kind=...)``); what a marker leaves
out comes from the node id (:func:`suite_of`, :func:`identity_from_nodeid`).

At collection (:func:`select_items`, called from ``pytest_collection_modifyitems``), in this order:

1. ``--conformance-ops``: keep the tests whose ``op`` is named; names that match nothing are an error when none
   matches (a typo must not look like an empty, green run), a warning line otherwise; one line names the
   suites none of whose tests checks a named op (``device_api``, ``streams``, ...: left out whole), printed
   at collection, or under xdist by the controller when the first worker finishes (:func:`tell_left_out`);
2. isolation children keep the node ids their parent gave them (:mod:`neuron_conformance.conformance.survival.isolation`); otherwise
   ``--conformance-shard-id/--conformance-num-shards`` keep one shard (:mod:`neuron_conformance.conformance.pytest_plugin.sharding`: an op's tests stay together);
3. every test a manifest entry covers becomes a strict xfail, and its record names the entry (the entry
   itself is kept on the item for :mod:`neuron_conformance.conformance.verdict.expectations`: class and size expected).
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from pathlib import Path

import pytest

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.conformance.pytest_plugin import sharding
from neuron_conformance.conformance.pytest_plugin.run_state import RunState
from neuron_conformance.conformance.verdict.expectations import ENTRY_KEY

EXPECTATION_KEY = pytest.StashKey[dict]()
"""Record fields a test item starts with: the manifest entry that expects it to fail."""
LEFT_OUT_KEY = "conformance_ops_left_out"
"""Key of an xdist worker's ``workeroutput``: suite -> tests that ``--conformance-ops`` left out (whole suites)."""
_LEFT_OUT_TOLD = pytest.StashKey[bool]()
"""The left-out suites' line was written in this process."""


def clean_nodeid(nodeid: str) -> str:
    """The node id without the ``@<group>`` suffix that ``--dist loadgroup`` appends (xdist's
    ``LoadGroupScheduling`` renames items ``path::test[params]@group``), so records, repro commands and
    baseline diffs use the same id in every mode."""
    at = nodeid.rfind("@")
    if at < 0:
        return nodeid
    tail = nodeid[at:]
    if "]" in tail or "::" in tail or "[" in tail:
        return nodeid  # the "@" is inside the test name or its parameters
    return nodeid[:at]


def suite_of(nodeid: str) -> str:
    """The suite a node id belongs to when no marker says: its file's stem without ``test_``
    (``opsuites/test_layouts.py::...`` -> ``layouts``)."""
    stem = Path(clean_nodeid(nodeid).split("::")[0]).stem
    return stem[5:] if stem.startswith("test_") else stem


def identity_from_nodeid(nodeid: str) -> dict:
    """Best guess of suite, op and dtype from a pytest node id alone (when no marker is at hand).

    ``opsuites/test_compare_cpu.py::test_compare_cpu[add-float32]`` gives suite ``compare_cpu``, op
    ``add`` and dtype ``float32`` (the OpInfo suites' parameter ids are ``<full_name>-<dtype>``).
    """
    _path, _, rest = clean_nodeid(nodeid).partition("::")
    ident = {"suite": suite_of(nodeid), "kind": "op", "op": nodeid, "dtype": None}
    name, _, params = rest.partition("[")
    params = params[:-1] if params.endswith("]") else params
    if params:
        head, _, last = params.rpartition("-")
        if head and last in opts.KNOWN_DTYPES:
            ident["op"], ident["dtype"] = head, last
        else:
            ident["op"] = params
    elif name:
        ident["op"] = name.rsplit("::", 1)[-1]
    return ident


def item_identity(item: pytest.Item) -> dict:
    """The ``conformance`` marker's fields of a test item (op, dtype, variant, suite, kind), or {}."""
    mark = item.get_closest_marker("conformance")
    if mark is None:
        return {}
    ident = dict(mark.kwargs)
    if mark.args:
        ident.setdefault("op", mark.args[0])
    return ident


def record_identity(item: pytest.Item) -> dict:
    """The five identity fields of a test item's record, every one filled (marker first, then node id)."""
    ident = item_identity(item)
    return {
        "suite": ident.get("suite") or suite_of(item.nodeid),
        "kind": ident.get("kind") or "op",
        "op": ident.get("op") or item.name,
        "dtype": ident.get("dtype"),
        "variant": ident.get("variant"),
    }


def select_items(config: pytest.Config, session: RunState, items: list) -> None:
    """Apply ``--conformance-ops``, the isolation child's list or the shard, and the manifests (module docstring)."""
    wanted = opts.get_option(config, "ops")
    if wanted:
        keep, drop = [], []
        for item in items:
            (keep if item_identity(item).get("op") in wanted else drop).append(item)
        left_out = suites_left_out(keep, drop)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        if session.is_worker:  # the controller tells, from the first worker that finishes (tell_left_out)
            config.workeroutput[LEFT_OUT_KEY] = left_out
        else:
            tell_left_out(config, left_out)
        if not session.is_worker:  # under xdist the controller reports, from the collected ids
            report_unknown_ops(
                config,
                wanted,
                {item_identity(i).get("op") for i in keep},
                bool(drop or keep),
                known={str(o) for i in items + drop if (o := item_identity(i).get("op"))},
            )
    if session.isolation_child:
        _keep_child_items(config, items)
    elif session.num_shards:
        _select_shard(config, session, items)
    if session.controls_run:
        for item in items:
            session.identities[item.nodeid] = record_identity(item)
    _mark_expected_failures(session, items)


def suites_left_out(keep: list, drop: list) -> dict[str, int]:
    """Suite -> number of its tests dropped, for the suites none of whose tests was kept."""
    kept = {record_identity(i)["suite"] for i in keep}
    dropped = Counter(record_identity(i)["suite"] for i in drop)
    return {suite: n for suite, n in sorted(dropped.items()) if suite not in kept}


def left_out_line(left_out: dict[str, int]) -> str | None:
    """The one line naming the suites ``--conformance-ops`` left out whole, or None when there are none."""
    if not left_out:
        return None
    suites = ", ".join(f"{suite} ({n} test{'s' if n != 1 else ''})" for suite, n in left_out.items())
    return f"conformance: --conformance-ops left out the suites with none of the named ops: {suites}"


def tell_left_out(config: pytest.Config, left_out: dict[str, int] | None) -> None:
    """Write :func:`left_out_line` once in this process (the xdist controller gets ``left_out`` from each
    worker's ``workeroutput``; they all collected the same tests)."""
    line = left_out_line(left_out or {})
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if line is None or tr is None or config.stash.get(_LEFT_OUT_TOLD, False):
        return
    config.stash[_LEFT_OUT_TOLD] = True
    if getattr(tr._tw, "width_of_current_line", 0):  # after the progress dots of the tests run so far
        tr.write("\n")
    tr.write_line(line, yellow=True)


def check_collected_ops(session: RunState, nodeids: list[str]) -> None:
    """The xdist controller's ``--conformance-ops`` check on the first worker's collection (a worker cannot tell).

    Raises:
        pytest.UsageError: no collected test checks any of the names (through :func:`report_unknown_ops`).
    """
    if not session.mark_ops_checked():
        return
    wanted = opts.get_option(session.config, "ops")
    if not wanted:
        return
    matched = {n for n in wanted if any(f"[{n}-" in i or f"[{n}]" in i for i in nodeids)}
    if not nodeids:
        pytest.exit(
            f"conformance: --conformance-ops: no collected test checks {', '.join(sorted(wanted)[:10])} "
            f"(names are OpInfo full names such as nn.functional.gelu, model ids or scenario "
            f"names)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    known = {str(identity_from_nodeid(i)["op"]) for i in nodeids}
    report_unknown_ops(session.config, wanted, matched, True, known=known)


def suggest(name: str, known) -> list[str]:
    """Up to three collected op names closest to ``name`` (:func:`difflib.get_close_matches`)."""
    return difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)


def describe_unknown(unknown: list[str], known) -> str:
    """The unknown names, each with its nearest collected names: ``addd (did you mean add, addr?)``."""
    parts = []
    for name in unknown[:10]:
        close = suggest(name, known) if known else []
        parts.append(f"{name} (did you mean {', '.join(close)}?)" if close else name)
    return ", ".join(parts) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")


def report_unknown_ops(config: pytest.Config, wanted, matched: set, collected: bool, known=()) -> None:
    """``--conformance-ops`` names that match no collected test: an error when none matches, a warning line naming
    them otherwise; each unknown name comes with the nearest of the ``known`` collected op names.

    Raises:
        pytest.UsageError: none of ``wanted`` matched a collected test.
    """
    unknown = sorted(set(wanted) - matched)
    if not unknown or not collected:
        return
    shown = describe_unknown(unknown, {k for k in known if k})
    if not matched:
        raise pytest.UsageError(
            f"conformance: --conformance-ops: no collected test checks {shown} (names are OpInfo full "
            f"names such as nn.functional.gelu, model ids or scenario names)"
        )
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"conformance: --conformance-ops: no collected test checks {shown}", yellow=True)


NODEIDS_ENV = "CONFORMANCE_ISOLATION_NODEIDS"
"""In an isolation child: the file listing the node ids it runs, one a line, in its parent's order."""


def _keep_child_items(config: pytest.Config, items: list) -> None:
    """In an isolation child: keep only the node ids the parent asked for, in its order."""
    path = os.environ.get(NODEIDS_ENV)
    if not path:
        return
    wanted = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln]
    by_id = {i.nodeid: i for i in items}
    keep = [by_id[n] for n in wanted if n in by_id]
    keep_ids = {i.nodeid for i in keep}
    drop = [i for i in items if i.nodeid not in keep_ids]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _select_shard(config: pytest.Config, session: RunState, items: list) -> None:
    groups = {item.nodeid: (item_identity(item).get("op") or item.nodeid) for item in items}
    shard_of = sharding.assign_shards(
        [i.nodeid for i in items], groups.__getitem__, session.num_shards, session.shard_durations
    )
    keep = [i for i in items if shard_of[i.nodeid] == session.shard_id]
    drop = [i for i in items if shard_of[i.nodeid] != session.shard_id]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _mark_expected_failures(session: RunState, items: list) -> None:
    """Every test a manifest entry covers becomes a strict xfail; its record names the entry."""
    if not len(session.manifest):
        return
    for item in items:
        ident = item_identity(item)
        if not ident.get("op"):
            continue
        entry = session.manifest.match(
            op=ident["op"], dtype=ident.get("dtype"), variant=ident.get("variant"), suite=ident.get("suite")
        )
        if entry is not None:
            item.add_marker(
                pytest.mark.xfail(strict=True, reason=f"[{entry.reason}] {entry.note} ({entry.source})".strip())
            )
            item.stash[EXPECTATION_KEY] = {"expected_failure": entry.reason, "manifest_entry": entry.source}
            item.stash[ENTRY_KEY] = entry
