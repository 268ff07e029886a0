"""``python -m neuron_conformance.migrate`` runs the ``neuron-migrate`` CLI."""

import sys

from neuron_conformance.migrate.cli import main

if __name__ == "__main__":
    sys.exit(main())
