"""neuron-migrate: find CUDA-specific PyTorch idioms and rewrite them to device-generic ones
(``torch.accelerator``, ``torch.amp``, ``torch.Event``/``torch.Stream``), so the code runs on
any accelerator (Trainium's ``neuron``, XPU, MPS, CUDA) unchanged.

Public API: :func:`neuron_conformance.migrate.engine.check_source`, :class:`neuron_conformance.migrate.engine.Settings`,
:func:`neuron_conformance.migrate.registry.selection`, and the ``neuron-migrate`` CLI (:mod:`neuron_conformance.migrate.cli`).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
