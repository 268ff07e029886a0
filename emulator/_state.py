"""Process-wide state of the emulated device (mode, install flag, registered libraries).

Kept in one small module so every other module reads the same values without import cycles.
"""

from __future__ import annotations

import os

BACKEND_NAME = "neuron"
"""Device type string PyTorch's PrivateUse1 key is renamed to."""

MODES = ("mirror", "device", "alternate")
"""Numeric modes: ``mirror`` runs every op on its CPU kernel (bitwise equal to CPU); ``device`` lets
composite ops decompose the way they do on a non-CPU device; ``alternate`` is ``device`` with kernels that
compute differently from the CPU where PyTorch leaves the result to the device (:mod:`.alternate`)."""

ENV_MODE = "CONFORMANCE_EMULATOR_MODE"
"""Environment variable read by :func:`default_mode` (and by ``neuron_conformance.emulator.backend``)."""

DIST_BACKEND = "neuron_gloo"
"""``torch.distributed`` backend name for the emulated device (registered by ``neuron_conformance.emulator.distributed``)."""

EXECUTION_MODES = {
    "CONFORMANCE_EMULATOR_ASYNC": ["0", "1"],
    "CONFORMANCE_EMULATOR_FALLBACK": ["", "aten::cumsum,aten::mm,aten::tanh,aten::abs,aten::sin"],
}
"""The emulator's declared execution modes (the backend module's ``CONFORMANCE_MODES``, run by
``python -m neuron_conformance.conformance.backend.modes``): environment variable -> the values to try, the first the default.
``CONFORMANCE_EMULATOR_ASYNC``: asynchronous execution ("1": kernels queued on per-stream worker threads,
:mod:`.async_mode`); ``CONFORMANCE_EMULATOR_FALLBACK``: five ops run as a CPU fallback (:mod:`.optracking`)."""

ENV_ASYNC = "CONFORMANCE_EMULATOR_ASYNC"
"""Environment variable of the execution mode: ``"1"`` queues kernels on per-stream worker threads
(:mod:`neuron_conformance.emulator.async_mode`), ``"0"`` (default) runs them on the calling thread."""

ENV_RNG = "CONFORMANCE_EMULATOR_RNG"
"""Environment variable read when the emulator is imported: ``"device"`` (default) gives the device its own
random stream; ``"host"`` makes the device's random ops draw from the CPU's default generator, one stream in
program order for host and device (:mod:`neuron_conformance.emulator.rng`)."""

RNG_STREAMS = ("device", "host")
"""Accepted values of :data:`ENV_RNG`."""

installed = False
mode = "mirror"
autoload_mode: str | None = None
"""The mode ``$CONFORMANCE_EMULATOR`` installed at ``import torch`` (:mod:`.autoload`), or None."""
async_mode = False


def check_mode(mode_name: object) -> str:
    """Return ``mode_name`` if it is one of :data:`MODES`.

    Raises:
        ValueError: when it is not, naming the accepted values.
    """
    if mode_name not in MODES:
        raise ValueError(
            f"neuron emulator: unknown mode {mode_name!r}; accepted modes are {', '.join(map(repr, MODES))} "
            f"(argument `mode` or env var {ENV_MODE})"
        )
    return mode_name  # type: ignore[return-value]


def default_mode() -> str:
    """Mode named by ``$CONFORMANCE_EMULATOR_MODE``, else ``"mirror"``.

    Raises:
        ValueError: when the variable is set to an unknown mode.
    """
    return check_mode(os.environ.get(ENV_MODE, "mirror").strip() or "mirror")


def default_async() -> bool:
    """The execution mode named by ``$CONFORMANCE_EMULATOR_ASYNC``: True for ``"1"``, False for ``"0"`` or unset.

    Raises:
        ValueError: any other value (the message names the variable and the accepted values).
    """
    raw = os.environ.get(ENV_ASYNC, "0").strip() or "0"
    if raw not in ("0", "1"):
        raise ValueError(
            f"neuron emulator: {ENV_ASYNC}={raw!r}; accepted values are '0' (synchronous) and '1' "
            f"(asynchronous streams)"
        )
    return raw == "1"


def rng_stream() -> str:
    """The random stream :data:`ENV_RNG` asks for (``"device"`` when unset or empty).

    Raises:
        ValueError: any other value than those of :data:`RNG_STREAMS`, naming the variable.
    """
    raw = os.environ.get(ENV_RNG, "").strip() or "device"
    if raw not in RNG_STREAMS:
        raise ValueError(f"neuron emulator: {ENV_RNG}={raw!r}; accepted values are 'device' (default) and 'host'")
    return raw
