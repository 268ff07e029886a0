"""The generate output's cache, under the field name of the running transformers (model_zoo/decode.py)."""

from __future__ import annotations

import types

import pytest

from neuron_conformance.model_zoo import decode

pytest.importorskip("transformers")


@pytest.mark.parametrize("field", decode.CACHE_FIELDS)
def test_the_returned_cache_is_read_from_either_field_and_named(field):
    cache = object()
    out = types.SimpleNamespace(**{f: None for f in decode.CACHE_FIELDS})
    setattr(out, field, cache)
    assert decode.returned_cache(out) == (field, cache)


def test_no_cache_field_gives_none():
    assert decode.returned_cache(types.SimpleNamespace(sequences=None)) == (None, None)


def test_the_cache_argument_is_the_output_field_of_the_running_transformers():
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    fields = GenerateDecoderOnlyOutput.__dataclass_fields__
    assert decode.cache_argument() in fields
    assert decode.cache_argument() == ("cache" if "cache" in fields else "past_key_values")
