"""Expected failures of the DTensor op sweep: DTensor's own refusals, each tied to the message it fails with.

An op the sweep runs can fail on every device for reasons of DTensor's, not the device's: no sharding strategy
is registered for its aten op, a composite mixes a plain tensor with DTensors, its output shape depends on the
data, or DTensor computes a sharded result locally that differs from the unsharded one (a convolution over a
sharded spatial dimension). Those are read from a run on ``--conformance-device cpu`` with gloo, where no
device is involved, and kept in ``dtensor_expected.toml`` beside this module.

An entry is strict in two ways, so that it never hides a device bug:

1. every failing placement combination of a listed op must fail with a text that matches the entry's
   ``match`` (a Python regular expression, searched in the failure text the sweep records): a listed op that
   fails otherwise (a wrong value where DTensor refuses, another exception) is ``unexpected``, a failure;
2. a listed op that passes is ``unexpected-pass``, a failure that asks for the entry to be removed, when the
   torch release under test is the one the file was measured on (``torch`` at the top of the file); on another
   release DTensor may have gained the op, so it is judged ``passed`` and the verdict says the entry is stale.

The combinations of a listed op that pass are still compared with the CPU, like any other op's.

File format (TOML)::

    torch = "2.13"                      # the release the entries were measured on (major.minor)

    [[expected]]
    ops = ["take", "put"]               # OpInfo names (``name`` or ``name.variant``)
    meshes = ["1d", "2d"]               # mesh ids of the sweep; default: every mesh
    match = "does not have a sharding strategy registered"
    reason = "DTensor has no sharding strategy for the op"
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import torch

DEFAULT_PATH = pathlib.Path(__file__).with_name("dtensor_expected.toml")
"""The shipped list (package data of ``neuron_conformance.model_zoo``)."""

MESH_IDS = ("1d", "2d")
"""Mesh ids an entry may name (``test_dtensor_ops.MESHES``)."""


@dataclasses.dataclass(frozen=True)
class ExpectedFailure:
    """One ``(op, mesh)`` that DTensor itself fails: ``match`` must be found in every failing combination's text."""

    op: str
    mesh: str
    match: str
    reason: str

    def explains(self, problem: str) -> bool:
        """True when the failure text ``problem`` is this entry's refusal (``re.search`` of :attr:`match`)."""
        return re.search(self.match, problem) is not None


class ExpectedFailuresError(ValueError):
    """The expected-failure file is unreadable or malformed; the message names the file and the entry."""


@dataclasses.dataclass(frozen=True)
class ExpectedFailures:
    """The parsed file: ``entries`` keyed by ``(op, mesh)`` and the torch release (``"2.13"``) it was measured on."""

    entries: dict
    torch_release: str

    def get(self, op: str, mesh: str) -> ExpectedFailure | None:
        """The entry for ``op`` on mesh ``mesh``, or None."""
        return self.entries.get((op, mesh))

    def strict_passes(self) -> bool:
        """True when an expected failure that passes fails the run: the running torch is the measured release."""
        return release(torch.__version__) == self.torch_release


def release(version: str) -> str:
    """``major.minor`` of a torch version string (``"2.13.0+cpu"`` -> ``"2.13"``)."""
    return ".".join(version.split("+")[0].split(".")[:2])


def parse(text: str, where: str = "<string>") -> ExpectedFailures:
    """Parse the TOML ``text`` of an expected-failure file (format in the module docstring).

    Raises:
        ExpectedFailuresError: bad TOML, a missing or mistyped key, an unknown mesh id, a ``match`` that is not a
            valid regular expression, or an ``(op, mesh)`` listed twice; the message names ``where`` and the entry.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExpectedFailuresError(f"{where}: not valid TOML: {exc}") from None
    measured = data.get("torch")
    if not isinstance(measured, str) or not re.fullmatch(r"\d+\.\d+", measured):
        raise ExpectedFailuresError(f"{where}: 'torch' must name the measured release as \"major.minor\"")
    entries: dict = {}
    for number, raw in enumerate(data.get("expected", []), start=1):
        label = f"{where}: [[expected]] entry {number}"
        ops, meshes = raw.get("ops"), raw.get("meshes", list(MESH_IDS))
        match, reason = raw.get("match"), raw.get("reason")
        if not (isinstance(ops, list) and ops and all(isinstance(o, str) for o in ops)):
            raise ExpectedFailuresError(f"{label}: 'ops' must be a non-empty list of OpInfo names")
        if not (isinstance(meshes, list) and meshes and set(meshes) <= set(MESH_IDS)):
            raise ExpectedFailuresError(f"{label}: 'meshes' must be a list of {', '.join(MESH_IDS)}")
        if not isinstance(reason, str) or not reason.strip():
            raise ExpectedFailuresError(f"{label}: 'reason' is required")
        if not isinstance(match, str) or not match:
            raise ExpectedFailuresError(f"{label}: 'match' (the failure text, a regular expression) is required")
        try:
            re.compile(match)
        except re.error as exc:
            raise ExpectedFailuresError(f"{label}: 'match' is not a regular expression: {exc}") from None
        for op in ops:
            for mesh in meshes:
                if (op, mesh) in entries:
                    raise ExpectedFailuresError(f"{label}: {op} on mesh {mesh} is listed twice")
                entries[(op, mesh)] = ExpectedFailure(op, mesh, match, reason.strip())
    return ExpectedFailures(entries, measured)


def load(path: pathlib.Path = DEFAULT_PATH) -> ExpectedFailures:
    """Read and :func:`parse` the file at ``path``.

    Raises:
        ExpectedFailuresError: the file cannot be read, or :func:`parse` refuses it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExpectedFailuresError(f"{path}: cannot read the DTensor expected-failure file: {exc}") from None
    return parse(text, str(path))
