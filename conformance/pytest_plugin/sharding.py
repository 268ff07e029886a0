"""Split a run across machines: ``--conformance-shard-id I --conformance-num-shards N``.

Tests are grouped so that an op's tests stay together (the ``conformance`` marker's ``op``: an OpInfo
``full_name``, model id or scenario; a test without the marker is its own group). Groups are dealt to
shards by the longest-processing-time rule: heaviest group first, each to the shard with the least work so
far (ties: the lower shard id), groups of equal weight in name order. The weight of a group is the sum of
its tests' ``duration`` in a previous run's ``summary.json`` (``--conformance-shard-durations``; a test it lacks
counts as the median known duration), else its number of tests. The split depends only on the collected
node ids and that file, so every machine (and every xdist worker) computes the same one.

Each shard's ``run.json`` says ``shard: {"id": I, "count": N}``; ``python -m neuron_conformance.reports merge`` joins the
shards' reports and checks that they come from the same torch, device and harness versions.
"""

from __future__ import annotations

import statistics
from typing import Callable, Iterable, Sequence

from neuron_conformance.conformance.pytest_plugin.options import OptionError


def durations_from_summary(summary: dict) -> dict[str, float]:
    """``nodeid -> duration`` (seconds) of the records of an earlier run's summary (``summary.json``, read by
    :func:`neuron_conformance.conformance.pytest_plugin.reporting.read_summary`); records without a non-negative duration are left out."""
    out: dict[str, float] = {}
    for rec in summary.get("records", []):
        d = rec.get("duration")
        if isinstance(rec.get("nodeid"), str) and isinstance(d, (int, float)) and d >= 0:
            out[rec["nodeid"]] = float(d)
    return out


def assign_shards(
    nodeids: Sequence[str], group_of: Callable[[str], str], num_shards: int, durations: dict[str, float] | None = None
) -> dict[str, int]:
    """``nodeid -> shard id`` for every node id (rules in the module docstring).

    Args:
        nodeids: the collected tests.
        group_of: the group (op) of a node id; tests of one group get one shard.
        num_shards: N >= 1.
        durations: previous durations by node id, or None to balance by test count.

    Raises:
        ValueError: ``num_shards`` < 1.
    """
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    groups: dict[str, list[str]] = {}
    for nid in nodeids:
        groups.setdefault(group_of(nid), []).append(nid)
    known = [d for d in (durations or {}).values()]
    fill = statistics.median(known) if known else 1.0

    def weight(members: Iterable[str]) -> float:
        if not durations:
            return float(len(list(members)))
        return sum(durations.get(n, fill) for n in members)

    order = sorted(groups, key=lambda g: (-weight(groups[g]), g))
    load = [0.0] * num_shards
    out: dict[str, int] = {}
    for g in order:
        shard = min(range(num_shards), key=lambda i: (load[i], i))
        load[shard] += weight(groups[g])
        for nid in groups[g]:
            out[nid] = shard
    return out


def check_shard_options(shard_id: int | None, num_shards: int | None) -> None:
    """Check the parsed ``--conformance-shard-id`` and ``--conformance-num-shards`` together.

    Raises:
        OptionError: only one of them given, ``num_shards`` < 1, or ``shard_id`` outside ``0 .. num_shards-1``;
            the one-line message names the option and the accepted range (the session turns it into exit 2).
    """
    if shard_id is None and num_shards is None:
        return
    if shard_id is None or num_shards is None:
        raise OptionError("--conformance-shard-id and --conformance-num-shards go together: give both or neither")
    if num_shards < 1:
        raise OptionError(f"--conformance-num-shards {num_shards} is out of range; accepted: an integer >= 1")
    if not 0 <= shard_id < num_shards:
        raise OptionError(
            f"--conformance-shard-id {shard_id} is out of range for --conformance-num-shards {num_shards} "
            f"(shard ids are 0..{num_shards - 1})"
        )
