"""Install the emulated ``neuron`` device at ``import torch`` when ``$CONFORMANCE_EMULATOR`` asks for it.

This is the function behind the project's ``[project.entry-points."torch.backends"]`` entry point
(``pyproject.toml``). torch >= 2.5 calls every function of that group at the end of ``import torch``
unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (torch 2.13, ``torch/__init__.py``,
``_import_device_backends``). Because the variable is inherited, every child process (``mp.spawn``,
``torchrun`` workers, ``multiprocessing`` with the ``spawn`` or ``forkserver`` start method) gets the
emulated device as soon as it imports torch, without a start-up shim.

``$CONFORMANCE_EMULATOR``:

* unset or empty: :func:`load` returns at once; nothing is installed and nothing beyond this module and
  :mod:`neuron_conformance.emulator._state` is imported, so every other ``import torch`` is untouched;
* ``mirror`` or ``device``: ``neuron_conformance.emulator.install(mode=...)`` (the numeric modes of
  :data:`neuron_conformance.emulator.MODES`) and the ``neuron_gloo`` collective backend where ``torch.distributed``
  exists, so ``init_process_group()`` with no backend works in the children too.

A later ``neuron_conformance.emulator.install(mode=...)`` in the same process (the harness's own install) with the
same mode is a no-op; with another mode it raises ``ValueError`` naming the variable (see
:func:`check_install_mode`). ``set_mode`` still switches the mode at run time.
"""

from __future__ import annotations

import os

from . import _state

ENV_AUTOLOAD = "CONFORMANCE_EMULATOR"
"""Environment variable read at ``import torch``: ``mirror`` or ``device`` installs the emulated device."""


def requested_mode() -> str | None:
    """The mode ``$CONFORMANCE_EMULATOR`` asks for, or None when it is unset or empty.

    Raises:
        ValueError: any other value than ``mirror`` or ``device`` (one line naming the variable and the
            accepted values).
    """
    raw = os.environ.get(ENV_AUTOLOAD, "").strip()
    if not raw:
        return None
    if raw not in _state.MODES:
        raise ValueError(
            f"{ENV_AUTOLOAD}={raw!r}: accepted values are "
            f"{', '.join(map(repr, _state.MODES))} (or unset: no emulated device at import torch)"
        )
    return raw


def load() -> None:
    """Entry point of the ``torch.backends`` group: install the emulator when ``$CONFORMANCE_EMULATOR`` is set.

    Raises:
        ValueError: ``$CONFORMANCE_EMULATOR`` holds an unknown mode (torch re-raises it as ``RuntimeError:
            Failed to load the backend extension``, which fails ``import torch``: a misspelt mode is never
            silently ignored), or an emulator setting it reads is invalid (see ``install``).
        RuntimeError: another PrivateUse1 backend is already registered.
    """
    mode = requested_mode()
    if mode is None:
        return
    # deferred: the emulator imports torch; this runs at the end of torch's own import, and only when asked
    from . import install

    install(mode=mode)
    _state.autoload_mode = mode
    # deferred: collectives are registered only where torch.distributed exists (not in every build)
    import torch.distributed as dist

    if dist.is_available() and dist.is_gloo_available():
        from . import distributed  # deferred: needs torch.distributed (checked above)

        distributed.register()


def check_install_mode(mode: str) -> None:
    """Refuse an explicit ``install(mode=...)`` that contradicts the mode installed at ``import torch``.

    Args:
        mode: the mode a later ``neuron_conformance.emulator.install`` call asks for.

    Raises:
        ValueError: the emulator was installed by :func:`load` in another mode; the message names
            ``$CONFORMANCE_EMULATOR`` and both modes.
    """
    if _state.autoload_mode is not None and mode != _state.autoload_mode:
        raise ValueError(
            f"neuron emulator: installed at import torch in {_state.autoload_mode!r} mode "
            f"({ENV_AUTOLOAD}={_state.autoload_mode}); this run asks for {mode!r}: set "
            f"{ENV_AUTOLOAD}={mode}, unset it, or ask for {_state.autoload_mode!r}"
        )
