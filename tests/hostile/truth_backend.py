"""A minimal third-party-looking backend: the emulated device plus the faults named in ``$HOSTILE_FAULTS``.

``--conformance-backend-module truth_backend`` (with ``tests/hostile`` on ``PYTHONPATH``). A backend module outside
``neuron_conformance.emulator`` is treated as a third-party (non-emulated) backend: no op counter, results not
required to be bitwise equal to the CPU. ``HOSTILE_FAULTS`` is a comma-separated list of keys of
:data:`faults_truth.FAULTS`; an unknown name raises ``ValueError`` at import.
"""

from __future__ import annotations

import os

from faults_truth import FAULTS

import neuron_conformance.emulator as emu

emu.install()

for _name in filter(None, (n.strip() for n in os.environ.get("HOSTILE_FAULTS", "").split(","))):
    if _name not in FAULTS:
        raise ValueError(f"HOSTILE_FAULTS names {_name!r}, not one of {sorted(FAULTS)}")
    FAULTS[_name]()
