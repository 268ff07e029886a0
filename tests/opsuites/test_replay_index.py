"""The aten replay index and its capture: entries still reproduce on this torch, derivations, snapshots.

Fast checks (no device): a few committed entries of each relation are still captured from their OpInfo
sample (:func:`neuron_conformance.opsuites.replay_calls.capture`), the derivation paths follow the documented relations,
a snapshot keeps storage offset, strides and aliasing, and a malformed index is refused with its name.
"""

from __future__ import annotations

import json

import pytest
import torch

from neuron_conformance.conformance.results.coverage import overload_name
from neuron_conformance.opsuites import replay_index
from neuron_conformance.opsuites.aten_capture import AtenCapture, snapshot
from neuron_conformance.opsuites.replay_calls import StaleReplayEntry, capture, replay_calls

# one committed entry of each kind: captured itself in a backward phase, out= of a captured functional,
# in-place of a captured functional, the grad_input out= of a backward, out= of a *_copy of a view op
SAMPLED = (
    "aten::glu_backward",
    "aten::multi_margin_loss.out",
    "aten::addmm_",
    "aten::glu_backward.grad_input",
    "aten::view_as_real_copy.out",
)


@pytest.fixture(scope="module")
def entries():
    return replay_index.load()


@pytest.mark.parametrize("target", SAMPLED)
def test_committed_entry_still_captured(entries, target):
    """torch 2.13 still reaches the entry's source from its OpInfo sample, and the derived calls run on
    the CPU (the index was built on this torch; a stale entry raises StaleReplayEntry)."""
    entry = entries[target]
    call = capture(entry)
    assert call.name == entry["source"]
    calls = replay_calls(target, entry)
    assert calls and all(overload_name(c.op) == target for c in calls)
    for c in calls:
        args, kwargs = c.fresh()
        c.op(*args, **kwargs)  # the CPU kernel accepts the derived call


def test_out_target_gets_sized_and_resized_calls(entries):
    calls = replay_calls("aten::multi_margin_loss.out", entries["aten::multi_margin_loss.out"])
    assert [c.label for c in calls] == ["out sized", "out resized from 0 elements"]
    assert calls[1].kwargs["out"].numel() == 0 and calls[0].kwargs["out"].numel() > 0


def test_paths_follow_relations():
    assert ["aten::add.Tensor", "out"] in replay_index.paths_of("aten::add.out")[1]
    assert replay_index.paths_of("aten::add_.Tensor")[1] == [
        ["aten::add_.Tensor", "same"],
        ["aten::add.Tensor", "inplace"],
    ]
    assert ["aten::view_as_real", "copy"] in replay_index.paths_of("aten::view_as_real_copy")[1]
    assert "aten::view_as_real" in replay_index.sources_of("aten::view_as_real_copy.out")  # out <- copy, 2 steps
    assert replay_index.paths_of("aten::add.Tensor")[0] == [["aten::add.Tensor", "same"]]


def test_targets_are_not_excluded_and_not_generated():
    from neuron_conformance.conformance.results import aten_audit

    targets = replay_index.targets()
    assert "aten::multi_margin_loss.out" in targets
    assert all(aten_audit.exclusion(t) is None for t in targets)
    assert "aten::add.Tensor" not in targets  # schema-derived inputs reach it


def test_snapshot_keeps_offset_strides_and_aliasing():
    base = torch.arange(12.0)
    view = base[2:].as_strided((2, 3), (1, 2), 3)
    a, b = snapshot((base, view), {})
    assert (b.storage_offset(), b.stride(), b.size()) == (3, (1, 2), torch.Size([2, 3]))
    assert torch.equal(b, view) and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert a.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    base.zero_()
    assert a.sum().item() == 66.0  # a copy, not an alias of the original


def test_capture_records_args_before_the_call():
    x = torch.ones(3)
    cap = AtenCapture(keep={"aten::add_.Tensor"})
    with cap:
        x.add_(1)
    assert "aten::add_.Tensor" in cap.seen
    assert torch.equal(cap.calls["aten::add_.Tensor"].args[0], torch.ones(3))


def test_stale_entry_is_named(entries):
    entry = dict(entries["aten::glu_backward"], source="aten::no_such_op")
    with pytest.raises(StaleReplayEntry, match="no call of aten::no_such_op"):
        capture(entry)
    with pytest.raises(StaleReplayEntry, match="no such OpInfo"):
        capture(dict(entry, opinfo="no.such.opinfo"))


def test_malformed_index_is_refused(tmp_path):
    path = tmp_path / "index.json"
    path.write_text(
        json.dumps(
            {
                "entries": {
                    "aten::x": {
                        "source": "aten::x",
                        "path": [["aten::x", "bogus"]],
                        "opinfo": "x",
                        "dtype": "float32",
                        "sample": 0,
                        "phase": "forward",
                    }
                }
            }
        )
    )
    with pytest.raises(ValueError, match="aten::x"):
        replay_index.load(path)
    with pytest.raises(ValueError, match="cannot be read"):
        replay_index.load(tmp_path / "missing.json")


def test_cpu_samples_refuses_a_sample_index_past_the_last():
    """``--conformance-sample N`` past the OpInfo's last sample is an error naming the count, never an empty pass."""
    import pytest
    import torch

    from neuron_conformance.opsuites.samples import cpu_samples, opinfo_by_name

    op = opinfo_by_name()["add"]
    assert [i for i, _ in cpu_samples(op, torch.float32, only=1)] == [1]
    with pytest.raises(ValueError, match=r"--conformance-sample 9999: add has \d+ sample input\(s\) in float32"):
        cpu_samples(op, torch.float32, only=9999)
