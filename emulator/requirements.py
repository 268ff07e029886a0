"""The torch the emulated device needs: a release and the APIs it is built on, checked before anything loads.

The emulator is a Python PrivateUse1 backend: it registers through
``torch.utils.backend_registration._setup_privateuseone_for_python_backend`` with hooks and a device guard
subclassed from ``torch._C._acc``, creates its tensors with ``torch._C._acc.create_empty_tensor``, and its
``torch.compile`` backend sets ``torch._functorch.config.force_non_lazy_backward_lowering``. Older releases
(torch 2.9 has none of the three) cannot run it; they fail at ``install()`` with one line naming the torch
the emulator needs (:func:`check`). It follows the CPU composites of torch 2.13, 2.14 and 2.15 (its tests
run on each).

:func:`unmet` is torch-light: it reads ``torch.__version__`` and looks the APIs up, without loading the
emulator's kernels; the package declares it as ``CONFORMANCE_TORCH_REQUIREMENT``, which a harness reads
before importing the backend module.
"""

from __future__ import annotations

import importlib
import re

TORCH = "2.13"
"""The oldest torch release the emulated device runs on."""

APIS = (
    "torch._C._acc.PrivateUse1Hooks",
    "torch._C._acc.DeviceGuard",
    "torch._C._acc.create_empty_tensor",
    "torch.utils.backend_registration._setup_privateuseone_for_python_backend",
    "torch._functorch.config.force_non_lazy_backward_lowering",
)
"""The torch APIs the emulated device is built on (dotted: a module path, then attributes)."""


def _release(version: str) -> tuple[int, ...]:
    """``"2.14.1+cu130"`` -> ``(2, 14, 1)`` (a pre-release counts as its release)."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` names an attribute path below the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def missing_apis() -> list[str]:
    """The APIs of :data:`APIS` the running torch lacks."""
    return [api for api in APIS if not _exists(api)]


def unmet() -> str | None:
    """None when the running torch can run the emulated device, else one line saying what it needs."""
    import torch  # deferred: the package imports without torch's start-up cost

    missing = missing_apis()
    if not missing and _release(torch.__version__) >= _release(TORCH):
        return None
    lacks = f"lacks {', '.join(missing)}" if missing else "is older"
    return f"the emulated device needs torch >= {TORCH} (torch {torch.__version__} {lacks})"


def check() -> None:
    """Raise ``ImportError`` naming the torch the emulated device needs when the running one cannot run it."""
    reason = unmet()
    if reason is not None:
        raise ImportError(reason)
