"""Run a Python script on the emulated ``neuron`` device, as a user would run code on a plugin
device: preload the backend (a ``sitecustomize``-style step), then execute the script unchanged.

Usage: ``python tests/migrate/neuron_launch.py SCRIPT [ARGS...]``. The script itself never
imports the harness.
"""

import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: neuron_launch.py SCRIPT [ARGS...]\n")
        raise SystemExit(2)
    import neuron_conformance.emulator as emulator

    emulator.install()
    try:
        from neuron_conformance.emulator import distributed
    except ImportError:  # the collective backend is optional for single-device scripts
        distributed = None
    if distributed is not None:
        distributed.register()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
