"""Start-up preflight of a third-party backend, in a child process: device APIs and the canary.

A backend nobody here wrote may segfault in the first API the harness touches (``pin_memory()``) or lack
a kernel the canary needs (an integer-scalar ``add``). So before any test, the process that controls the
run starts ONE child, ``python -m neuron_conformance.conformance.backend.probe --conformance-device D [--conformance-backend-module M]``, which imports the
backend and runs each probe, printing one JSON line before (``{"start": name}``) and after
(``{"name": name, "ok": bool, "error": str}``) each. A probe during which the child died is ``missing``
with ``crashed (SIGSEGV)``; a new child then runs the probes after it (at most one child per crash).
A child that hangs is killed after :data:`CHILD_TIMEOUT` seconds (its probe in flight: ``hung``).

Probes (in order): ``allocate`` (``torch.empty(1, device=dev)``; its failure is a :class:`DeviceError`),
the device-generic APIs of :data:`API_PROBES`, ``manual_seed_all`` (the backend module's, which the
harness seeds before each test), and the canary candidates of :data:`neuron_conformance.conformance.survival.crash_files.CANARIES` in
order until one works. The result, a :class:`Preflight`, is passed to xdist workers
(``workerinput[WORKERINPUT_KEY]``) and isolation children (``$CONFORMANCE_PREFLIGHT``), which do not probe
again. The emulated device and ``cpu`` are not probed (the emulator reports its own API support).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal as _signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field

import torch

from neuron_conformance.conformance.backend.device import DeviceError
from neuron_conformance.conformance.backend.environment import child_environ
from neuron_conformance.conformance.backend.profiler_probe import profile_one_op
from neuron_conformance.conformance.survival.crash_files import CANARIES, run_canary

ENV = "CONFORMANCE_PREFLIGHT"
"""Environment variable carrying the controller's :class:`Preflight` (JSON) to isolation children."""
WORKERINPUT_KEY = "conformance_preflight"
"""Key of the :class:`Preflight` (JSON) in an xdist worker's ``config.workerinput``."""
CHILD_TIMEOUT = 120.0
"""Seconds one probe child may run (importing torch and a backend included)."""
RNG_STATE = "get_rng_state/set_rng_state"
"""The device API row of the device module's RNG state (the op suites' sample wrappers freeze it where it works)."""


def _pin_memory(dev: torch.device) -> None:
    """``pin_memory()`` that pins: a backend whose ``pin_memory()`` returns an unpinned tensor has no pinned
    memory, whatever it returns."""
    if not torch.ones(1).pin_memory().is_pinned():
        raise RuntimeError("pin_memory() returned a tensor that is not pinned (is_pinned() is False)")


def _rng_state(dev: torch.device) -> None:
    """The device module's ``set_rng_state(get_rng_state())``."""
    module = torch.get_device_module(dev.type)
    for name in ("get_rng_state", "set_rng_state"):
        if not callable(getattr(module, name, None)):
            raise AttributeError(f"torch.{dev.type} has no {name}")
    module.set_rng_state(module.get_rng_state())


API_PROBES = {
    "torch.accelerator.synchronize": lambda dev: torch.accelerator.synchronize(),
    "torch.accelerator.memory_allocated": lambda dev: torch.accelerator.memory_allocated(),
    "torch.accelerator.empty_cache": lambda dev: torch.accelerator.empty_cache(),
    "torch.Stream": lambda dev: torch.Stream(dev),
    "torch.Event.record": lambda dev: torch.Event(dev).record(),
    "torch.Generator(device)": lambda dev: torch.Generator(dev),
    "torch.Tensor.pin_memory": _pin_memory,
    RNG_STATE: _rng_state,
    "torch.profiler": lambda dev: profile_one_op(dev, device_activity=False),
    "torch.profiler (ProfilerActivity.PrivateUse1)": lambda dev: profile_one_op(dev, device_activity=True),
}
"""Device-generic API -> a call with a tiny argument (``dev``: the ``torch.device``)."""


@dataclass
class Preflight:
    """What the preflight child found.

    Attributes:
        api_support: API name -> ``native`` / ``missing`` (the device profile's ``api_support``).
        notes: probe name -> why it is missing (``crashed (SIGSEGV)``, ``hung``, ``RuntimeError: ...``).
        canary: name of the canary variant to run after failing tests (a key of
            :data:`neuron_conformance.conformance.survival.crash_files.CANARIES`), or None: no canary works on a fresh device, so it is off.
        harness_lacks: what the harness itself uses that the backend lacks, one phrase each.
        children: number of probe children started.
    """

    api_support: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    canary: str | None = "default"
    harness_lacks: list = field(default_factory=list)
    children: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Preflight:
        """Raises ``ValueError`` (naming the input) on text that is not a preflight."""
        try:
            data = json.loads(text)
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{ENV}: not a conformance preflight: {exc}") from None


def _probe_names() -> list[str]:
    return ["allocate", *API_PROBES, "manual_seed_all", *(f"canary:{n}" for n in CANARIES)]


def _run_one(name: str, dev: torch.device) -> str | None:
    """Run probe ``name`` in this (child) process; None when it works, else the problem."""
    try:
        if name == "allocate":
            torch.empty(1, device=dev)
        elif name in API_PROBES:
            API_PROBES[name](dev)
        elif name == "manual_seed_all":
            module = getattr(torch, dev.type, None)
            seed_all = getattr(module, "manual_seed_all", None)
            if seed_all is None:
                return f"torch.{dev.type} has no manual_seed_all"
            seed_all(0)
        elif name.startswith("canary:"):
            return run_canary(dev, name.split(":", 1)[1])
    except Exception as exc:  # noqa: BLE001 - any failure means the API is not usable here
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


def child_main(argv: list[str] | None = None) -> int:
    """The child: import the backend, run the probes not skipped, one JSON line before and after each."""
    ap = argparse.ArgumentParser(prog="python -m neuron_conformance.conformance.backend.probe")
    ap.add_argument("--device", "--conformance-device", required=True)
    ap.add_argument("--backend-module", "--conformance-backend-module")
    ap.add_argument("--skip", default="")
    args = ap.parse_args(argv)
    if args.backend_module:
        importlib.import_module(args.backend_module)
    dev = torch.device(args.device)
    skip = set(filter(None, args.skip.split(",")))
    canary_found = False
    for name in _probe_names():
        if name in skip or (canary_found and name.startswith("canary:")):
            continue
        print(json.dumps({"start": name}), flush=True)
        problem = _run_one(name, dev)
        print(json.dumps({"name": name, "ok": problem is None, "error": problem}), flush=True)
        canary_found = canary_found or (name.startswith("canary:") and problem is None)
    return 0


def _child_env(base: dict | None = None) -> dict:
    """The preflight child's environment: ``base`` (the environment before the backend was loaded,
    :mod:`neuron_conformance.conformance.backend.environment`), else this process's."""
    env = child_environ(base)
    # the child imports what this process can: the backend may live on a path pytest inserted (rootdir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
    env.pop(ENV, None)
    return env


def _death(returncode: int | None) -> str:
    if returncode is None:
        return "hung"
    if returncode < 0:
        try:
            return f"crashed ({_signal.Signals(-returncode).name})"
        except ValueError:
            return f"crashed (signal {-returncode})"
    return f"the probe process exited with status {returncode}"


def run_preflight(device_type: str, backend_module: str | None, environ: dict | None = None) -> Preflight:
    """Run the probes in child processes (module docstring) and interpret them.

    ``environ``: the environment the children start with (default: this process's); the controller gives the
    one it had before it loaded the backend, so that the child sets the backend up as a test process does.

    Raises:
        neuron_conformance.conformance.backend.device.DeviceError: the device cannot allocate a tensor, or the backend module cannot
            be imported in the child (the parent imported it, so this is rare).
    """
    results: dict[str, str | None] = {}
    skip: list[str] = []
    children = 0
    last_error = ""
    while children < len(_probe_names()) + 1:
        children += 1
        cmd = [
            sys.executable,
            "-m",
            "neuron_conformance.conformance.backend.probe",
            "--conformance-device",
            device_type,
            "--skip",
            ",".join(skip),
        ]
        if backend_module:
            cmd += ["--conformance-backend-module", backend_module]
        try:
            proc = subprocess.run(
                cmd,
                check=False,
                capture_output=True,
                text=True,
                timeout=CHILD_TIMEOUT,
                env=_child_env(environ),
                stdin=subprocess.DEVNULL,
            )
            out, rc = proc.stdout, proc.returncode
            last_error = (proc.stderr or "").strip().splitlines()[-1:] or [""]
            last_error = last_error[0]
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            rc = None
        inflight = None
        for line in out.splitlines():
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(msg, dict):
                continue
            if "start" in msg:
                inflight = msg["start"]
            elif "name" in msg:
                results[msg["name"]] = msg.get("error")
                inflight = None
        if rc == 0:
            break
        if inflight is None:  # died before any probe: the import itself
            raise DeviceError(
                f"--conformance-backend-module {backend_module!r}: the preflight child died before its first "
                f"probe ({_death(rc)}): {last_error}"
            )
        results[inflight] = _death(rc)
        skip = list(results)
    return interpret(results, children)


def interpret(results: dict[str, str | None], children: int = 1) -> Preflight:
    """A :class:`Preflight` from probe name -> problem (None: it works).

    Raises:
        neuron_conformance.conformance.backend.device.DeviceError: ``allocate`` failed.
    """
    if results.get("allocate"):
        raise DeviceError(f"the device cannot allocate a tensor: {results['allocate']}")
    pf = Preflight(children=children)
    for name in API_PROBES:
        if name in results:
            pf.api_support[name] = "native" if results[name] is None else "missing"
            if results[name]:
                pf.notes[name] = results[name]
    lacks = []
    if results.get("manual_seed_all"):
        pf.notes["manual_seed_all"] = results["manual_seed_all"]
        lacks.append(f"manual_seed_all (device RNG not seeded before each test: {results['manual_seed_all']})")
    working = [n for n in CANARIES if f"canary:{n}" in results and results[f"canary:{n}"] is None]
    pf.canary = working[0] if working else None
    if pf.canary != "default":
        problem = results.get("canary:default")
        pf.notes["canary:default"] = problem
        instead = (
            f"canary {CANARIES[pf.canary][0]} used instead"
            if pf.canary
            else "no canary works on a fresh device: the canary is off"
        )
        lacks.append(f"the default canary {CANARIES['default'][0]} ({problem}); {instead}")
    pf.harness_lacks = lacks
    return pf


if __name__ == "__main__":
    sys.exit(child_main())
