"""``python -m neuron_conformance.reports``: see :mod:`neuron_conformance.reports.cli`."""

import sys

from .cli import main

sys.exit(main())
