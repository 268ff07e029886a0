"""``python -m migrate`` runs the ``neuron-migrate`` CLI."""
import sys

from migrate.cli import main

if __name__ == "__main__":
    sys.exit(main())
