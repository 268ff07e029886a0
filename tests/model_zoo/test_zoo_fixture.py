"""The trained generation fixture: shipped, small, loads offline, and decodes confidently."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from neuron_conformance.model_zoo import train_fixture  # noqa: E402
from neuron_conformance.model_zoo.generation import greedy  # noqa: E402


def test_fixture_files_are_small():
    assert train_fixture.WEIGHTS.exists(), "run python -m neuron_conformance.model_zoo.train_fixture"
    assert train_fixture.WEIGHTS.stat().st_size < 1_000_000


def test_encode_decode_round_trip_and_unknown_character():
    vocab = train_fixture.vocabulary()
    ids = train_fixture.encode("the harness", vocab)
    assert train_fixture.decode(ids, vocab) == "the harness"
    with pytest.raises(ValueError, match="not in the fixture vocabulary"):
        train_fixture.encode("THE", vocab)


def test_fixture_has_memorised_its_text_with_confident_margins():
    model, vocab = train_fixture.load_fixture()
    prompt = "the harness runs "
    ids = train_fixture.encode(prompt, vocab)[None]
    tokens, logits = greedy(model, ids, 24, use_cache=True)
    text = train_fixture.decode(tokens[0], vocab)
    start = train_fixture.TEXT.index(prompt) + len(prompt)
    expected = train_fixture.TEXT[start : start + 24]
    agree = sum(a == b for a, b in zip(text, expected))
    assert agree >= 20, f"fixture continues {prompt!r} with {text!r}, text has {expected!r}"
    top2 = logits[0].topk(2, dim=-1).values
    margins = top2[:, 0] - top2[:, 1]
    # confident: the median top-2 gap is far above bfloat16 rounding of these logits
    assert float(margins.median()) > 1.0


def test_load_fixture_missing_files_names_the_script(monkeypatch, tmp_path):
    monkeypatch.setattr(train_fixture, "WEIGHTS", tmp_path / "none.safetensors")
    with pytest.raises(FileNotFoundError, match="python -m neuron_conformance.model_zoo.train_fixture"):
        train_fixture.load_fixture()
