"""Wrong FlexAttention kernels and a broken profiler for ``fault_backend`` (``$CONFORMANCE_TEST_FAULT``).

The FlexAttention faults swap the emulator's PrivateUse1 kernels of the ``flex_attention`` /
``flex_attention_backward`` higher-order ops (:func:`neuron_conformance.emulator.flex.set_kernels`):

* ``flex-partial-blocks-as-full``: the forward treats every partial block of the ``BlockMask`` as full (it
  never calls ``mask_mod``), so a causal mask leaks the future inside its diagonal blocks;
* ``flex-score-mod-swapped-indices``: the forward calls ``score_mod`` with ``q_idx`` and ``kv_idx``
  swapped (right for symmetric score mods, wrong for ALiBi's ``kv - q``);
* ``flex-backward-ignores-score-mod``: the backward replays the identity instead of ``score_mod``
  (probabilities without the bias, no ``tanh'`` of soft-capping): a forward that is right and gradients
  that are wrong;
* ``flex-refused``: no compiled path: ``flex_attention``'s own device check stays in place, so every
  FlexAttention test is refused (``unsupported``).

``profiler-record-function-off``: the backend switches ``RecordFunction`` off in the test thread
(``torch._C._autograd._enable_record_function(False)``, a speed hack some stacks use), so profiles show
none of the device's ops and no ``record_function`` range.
"""

from __future__ import annotations

import functools

import torch

from neuron_conformance.emulator import flex


class _Switch:
    """A fault that is one call (the ``install()`` interface of :class:`neuron_conformance.emulator.faults.Fault`)."""

    def __init__(self, action, description: str):
        self._action = action
        self.description = description

    def install(self) -> "_Switch":
        self._action()
        return self


def _swapped_score_mod_forward(query, key, value, score_mod, *rest, **kwargs):
    def swapped(score, b, h, q_idx, kv_idx, *buffers):
        return score_mod(score, b, h, kv_idx, q_idx, *buffers)

    return flex.block_sparse_forward(query, key, value, swapped, *rest, **kwargs)


def _identity(score, b, h, q_idx, kv_idx, *buffers):
    return score


def _backward_without_score_mod(*args):
    # flex_attention_backward's arguments: (..., fw_graph [7], joint_graph [8], ...); joint None: rebuilt
    args = list(args)
    args[7], args[8] = _identity, None
    return flex.dense_backward(*args)


FLEX_FAULTS = {
    "flex-partial-blocks-as-full": lambda: _Switch(
        lambda: flex.set_kernels(forward=functools.partial(flex.block_sparse_forward, partial_blocks=False)),
        "partial blocks taken as full",
    ),
    "flex-score-mod-swapped-indices": lambda: _Switch(
        lambda: flex.set_kernels(forward=_swapped_score_mod_forward), "score_mod gets q_idx and kv_idx swapped"
    ),
    "flex-backward-ignores-score-mod": lambda: _Switch(
        lambda: flex.set_kernels(backward=_backward_without_score_mod), "backward without the score mod"
    ),
    "flex-refused": lambda: _Switch(flex.uninstall_compiled_path, "no compiled FlexAttention path"),
    "profiler-record-function-off": lambda: _Switch(
        lambda: torch._C._autograd._enable_record_function(False), "RecordFunction switched off"
    ),
}
"""Fault name -> factory of the object whose ``install()`` applies it."""
