"""Wrong kernels of the fallback and execution-mode fault tests (``fault_backend``'s table).

* :func:`hidden_fallback`: a kernel that has no native implementation (it raises
  ``NotImplementedError``) and silently runs the op on the CPU instead, telling only the backend's op
  tracking (:func:`neuron_conformance.emulator.optracking.note_fallback`), as TorchNeuron's default fallback does.
  Values are right, so only a fallback-aware verdict (``--conformance-require-native``) can flag it.
* :func:`mode_dependent_scale`: a kernel 1e-3 off only when ``$CONFORMANCE_TEST_MODE`` is ``"1"``, one of
  ``fault_backend``'s declared execution modes (``CONFORMANCE_MODES``): only a differential run across
  modes shows it as a difference between modes.
"""

from __future__ import annotations

import os

from neuron_conformance.emulator import faults, optracking

MODE_ENV = "CONFORMANCE_TEST_MODE"
"""The execution-mode setting ``fault_backend`` declares (values ``"0"`` and ``"1"``)."""


def _native_cumsum(*args, **kwargs):
    raise NotImplementedError("fault backend: no native cumsum kernel")


def _falls_back(op: str):
    """A kernel for ``op`` that tries its (missing) native kernel, then runs the CPU kernel silently."""

    def kernel(*args, **kwargs):
        try:
            return _native_cumsum(*args, **kwargs)
        except NotImplementedError:
            optracking.note_fallback(op)
            return faults.correct(op, *args, **kwargs)

    return kernel


def hidden_fallback():
    """``aten::cumsum`` and its ``out=`` overload (the one device mode runs) fall back to the CPU silently."""
    return tuple(
        faults.Fault(op, _falls_back(op), "hidden CPU fallback") for op in ("aten::cumsum", "aten::cumsum.out")
    )


def _scaled_in_mode_1(result, *args, **kwargs):
    if os.environ.get(MODE_ENV, "0") == "1":
        return faults._scale_inplace(result, 1 + 1e-3)
    return result


def mode_dependent_scale():
    """``aten::mul.Tensor`` and ``aten::mul.out`` 1e-3 off in mode ``CONFORMANCE_TEST_MODE=1`` only."""
    return (faults.override("aten::mul.Tensor", _scaled_in_mode_1), faults.override("aten::mul.out", _scaled_in_mode_1))
