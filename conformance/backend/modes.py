"""Differential runs across a backend's declared execution modes: ``python -m neuron_conformance.conformance.backend.modes``.

Accelerator backends have execution modes set by environment variables (TorchNeuron: a launch-blocking
switch, an op-fusion switch; CUDA's ``CUDA_LAUNCH_BLOCKING``), and bugs that show in one mode only are
common. A backend module declares its modes as ``CONFORMANCE_MODES`` (docs/architecture.md, "Device under
test"): a dict *setting* -> the values to try, the first being the default::

    CONFORMANCE_MODES = {"NEURON_LAUNCH_BLOCKING": ["0", "1"], "NEURON_FUSION": ["on", "off"]}

A setting is an environment variable, given to each run's pytest process; or a callable, given as
``{"name": (apply, values)}``: ``apply(value)`` is called in each run's process when the harness loads the
backend (:func:`apply_callables`, from ``$CONFORMANCE_MODE_CALLABLES``). Built-in devices and ``--conformance-device
cpu`` declare none; the emulated device declares ``CONFORMANCE_EMULATOR_ASYNC`` and its fallback set
(:data:`neuron_conformance.emulator._state.EXECUTION_MODES`).

The runner (:func:`main`) runs the chosen suites once with every setting at its default (the *baseline*
mode) and once per other value of each setting (one setting changed at a time), each into
``<report-dir>/modes/<NAME=VALUE>/``, then compares each run with the baseline test by test
(:func:`differences`). A test whose outcome or failure class differs, or whose judged error against the CPU
reference (``max_abs``) differs by more than the record's ``atol`` (by anything when the rule is ``exact``),
is a ``mode-difference`` naming both modes. Every run compares every sample (:data:`SAME_SAMPLES_BUDGET`),
so the modes judge the same samples. Values are compared through each mode's distance to the same
CPU reference: a difference between modes is at least the difference of their distances (triangle
inequality), so a reported difference is real, and one hidden inside the tolerance can be missed.
``<report-dir>/records/modes.jsonl`` gets one record per compared test (passed when every mode agrees),
``<report-dir>/modes.json`` the runs (setting, value, wall seconds, exit status, outcome counts), and the
report is built from them. Exit status: 0 no difference, 1 differences, 2 bad input or a run that could
not run its tests.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from neuron_conformance.conformance.backend import emulated as emulated_devices
from neuron_conformance.conformance.results.atomic import write_json_atomic
from neuron_conformance.conformance.results.outcomes import MODE_DIFFERENCE
from neuron_conformance.conformance.results.records import SCHEMA, read_records

HOOK = "CONFORMANCE_MODES"
"""The backend-module attribute that declares execution modes."""

CALLABLES_ENV = "CONFORMANCE_MODE_CALLABLES"
"""Set in a run's environment to ``NAME=VALUE`` (JSON object) for the callable settings of that mode."""

BUILT_IN = ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "meta")
"""Device types built into torch: they declare no execution modes."""


class ModesError(ValueError):
    """A declaration or an argument the runner cannot use, or a run that could not run its tests; the
    message names it. ``tail`` holds the last lines of that run's pytest log (empty for bad arguments)."""

    def __init__(self, message: str, tail: str = "") -> None:
        super().__init__(message)
        self.tail = tail


SAME_SAMPLES_BUDGET = "0"
"""``--conformance-sample-budget`` of every run unless the pytest arguments set one: 0, every sample. A time
budget picks the samples by the clock, so a slower mode compared fewer of them: in the emulator's sync/async
comparison three tests differed only so (a strict expected failure not reached in the slower
mode, and two ``max_abs`` taken over different sample sets). Each mode must judge the same samples."""

LOG_TAIL_LINES = 20
"""How many last lines of a failed run's pytest log the runner prints under its one-line error."""


_EXIT_NOISE = re.compile(
    r"^(nanobind: |\s*- leaked (instance|type|function) |\s*- \.\.\. skipped remainder|"
    r"See https://nanobind\.readthedocs\.io/)"
)
"""Lines a native extension prints at interpreter exit, after pytest's own summary: nanobind's reference-leak
report ("nanobind: leaked 12 types!", " - leaked type ...", the advice line), which triton's bindings print
at the end of every process that imported them (torch's CUDA builds). They would push the summary out of
the tail."""


def _log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of ``log`` (exit-time noise of native extensions left out,
    :data:`_EXIT_NOISE`), indented, or "" when it cannot be read."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln for ln in text.splitlines() if ln.strip() and not _EXIT_NOISE.match(ln)][-lines:]
    return "\n".join("    " + ln for ln in kept)


def validate(declared: object, where: str) -> dict[str, tuple[Any, list[str]]]:
    """``{name: (apply or None, [values])}`` of a ``CONFORMANCE_MODES`` declaration.

    Raises:
        ModesError: not a dict, a name that is not a non-empty string, fewer than two values, a value that is
            not a string, or a callable form that is not ``(callable, values)``; naming ``where`` and the setting.
    """
    if not isinstance(declared, Mapping):
        raise ModesError(f"{where}: {HOOK} must be a dict setting -> values, got {type(declared).__name__}")
    out: dict[str, tuple[Any, list[str]]] = {}
    for name, spec in declared.items():
        apply = None
        if isinstance(spec, tuple) and len(spec) == 2 and callable(spec[0]):
            apply, spec = spec
        if not isinstance(name, str) or not name or "=" in name:
            raise ModesError(f"{where}: {HOOK} setting {name!r} is not a name")
        if not isinstance(spec, (list, tuple)) or len(spec) < 2 or not all(isinstance(v, str) for v in spec):
            raise ModesError(
                f"{where}: {HOOK}[{name!r}] must be a list of two or more string values (the first "
                f"the default), or (callable, values); got {spec!r}"
            )
        out[name] = (apply, list(spec))
    return out


def declared_modes(backend_module: str | None, device: str | None) -> dict[str, tuple[Any, list[str]]]:
    """The execution modes of the device under test: the backend module's ``CONFORMANCE_MODES``; for the
    emulated device (no module; the device type an installed distribution declares as emulated, or none:
    the default) its backend module's; none for built-in devices.

    Raises:
        ModesError: the module cannot be imported, or its declaration is malformed (:func:`validate`).
    """
    if backend_module:
        try:
            module = importlib.import_module(backend_module)
        except Exception as exc:  # noqa: BLE001 - a broken backend must become one clear error
            raise ModesError(
                f"--conformance-backend-module {backend_module!r} cannot be imported: {type(exc).__name__}: {exc}"
            ) from None
        return validate(getattr(module, HOOK, None) or {}, f"--conformance-backend-module {backend_module}")
    emulated = emulated_devices.backend_module(device or emulated_devices.DEFAULT_DEVICE)
    if emulated is not None:
        module = importlib.import_module(emulated)  # the emulated device's backend module: its declaration
        return validate(
            getattr(module, HOOK, None) or {}, f"the emulated {device or emulated_devices.DEFAULT_DEVICE} device"
        )
    return {}


def plan(modes: Mapping[str, tuple[Any, list[str]]], chosen: Sequence[str] = ()) -> list[dict[str, str]]:
    """The modes to run, baseline first: every setting at its first value, then one mode per other value of
    each chosen setting (all when ``chosen`` is empty), with that setting changed.

    Raises:
        ModesError: a chosen setting the backend does not declare.
    """
    unknown = [c for c in chosen if c not in modes]
    if unknown:
        raise ModesError(f"--setting {', '.join(unknown)}: not declared; declared: {', '.join(modes) or 'none'}")
    base = {name: values[0] for name, (_, values) in modes.items()}
    runs = [dict(base)]
    for name in chosen or list(modes):
        for value in modes[name][1][1:]:
            runs.append({**base, name: value})
    return runs


def label(mode: Mapping[str, str], base: Mapping[str, str]) -> str:
    """``NAME=VALUE`` of the setting ``mode`` changes from ``base``, or ``baseline``."""
    changed = [f"{k}={v}" for k, v in mode.items() if base.get(k) != v]
    return ",".join(changed) or "baseline"


def apply_callables(module) -> None:
    """In a run's process: call each callable setting of ``module``'s ``CONFORMANCE_MODES`` with the value
    ``$CONFORMANCE_MODE_CALLABLES`` gives it (nothing when the variable is unset).

    Raises:
        ModesError: the variable is not a JSON object, or names a setting that is not a callable one.
    """
    text = os.environ.get(CALLABLES_ENV)
    if not text:
        return
    try:
        wanted = json.loads(text)
    except ValueError:
        wanted = None
    if not isinstance(wanted, dict):
        raise ModesError(f"{CALLABLES_ENV}={text!r} is not a JSON object NAME -> value")
    modes = validate(getattr(module, HOOK, None) or {}, module.__name__)
    for name, value in wanted.items():
        apply = modes.get(name, (None, None))[0]
        if apply is None:
            raise ModesError(f"{CALLABLES_ENV}: {name!r} is not a callable setting of {module.__name__}")
        apply(value)


def _distance_differs(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """What differs between two records' distances to the CPU reference (module docstring), else None. Not
    compared when either record saw uninitialised CPU values (``cpu_undefined``: the stress suite's kernels
    that leave an empty-class output unwritten, ``multi_margin_loss`` over zero classes): the reference is
    then garbage in both runs and its distance means nothing."""
    if a.get("cpu_undefined") or b.get("cpu_undefined"):
        return None
    ea, eb = a.get("max_abs"), b.get("max_abs")
    if not isinstance(ea, (int, float)) or not isinstance(eb, (int, float)) or ea == eb:
        return None
    exact = "exact" in (a.get("rule"), b.get("rule"))
    atol = a.get("atol") if isinstance(a.get("atol"), (int, float)) else 0.0
    if exact or abs(ea - eb) > atol:
        return f"max_abs against the CPU {ea:.3g} vs {eb:.3g} ({'rule exact' if exact else f'atol {atol:.3g}'})"
    return None


def _verdict(r: Mapping[str, Any] | None) -> str:
    if r is None:
        return "not run"
    cls = f" {r['failure_class']}" if r.get("failure_class") else ""
    return f"{r.get('outcome')}{cls}"


def differences(base: list[dict], other: list[dict], base_label: str, other_label: str) -> dict[str, str]:
    """nodeid -> what differs between two runs' records (outcome, failure class, or judged error beyond
    the tolerance, see the module docstring); tests in one run only differ too."""
    a = {r["nodeid"]: r for r in base}
    b = {r["nodeid"]: r for r in other}
    out = {}
    for nodeid in sorted(set(a) | set(b)):
        ra, rb = a.get(nodeid), b.get(nodeid)
        va, vb = _verdict(ra), _verdict(rb)
        if va != vb:
            out[nodeid] = f"{base_label}: {va}; {other_label}: {vb}"
        elif ra is not None and rb is not None and (why := _distance_differs(ra, rb)):
            out[nodeid] = f"{base_label} and {other_label} both {va}, but {why}"
    return out


def _pytest_args(args: argparse.Namespace, report_dir: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *args.suite,
        "-p",
        "no:cacheprovider",
        f"--conformance-report-dir={report_dir}",
        "--conformance-no-report",
        "-q",
    ]
    for flag, value in (
        ("--conformance-ops", args.ops),
        ("--conformance-dtypes", args.dtypes),
        ("--conformance-device", args.device),
        ("--conformance-backend-module", args.backend_module),
        ("--conformance-emulator-mode", args.emulator_mode),
    ):
        if value:
            cmd.append(f"{flag}={value}")
    if not any(str(a).startswith("--conformance-sample-budget") for a in args.pytest_args):
        cmd.append(f"--conformance-sample-budget={SAME_SAMPLES_BUDGET}")
    return cmd + list(args.pytest_args)


def run_mode(args: argparse.Namespace, modes, mode: Mapping[str, str], name: str, out: Path) -> dict[str, Any]:
    """Run the suites in ``mode`` into ``out/modes/<name>``; the run's entry of ``modes.json``.

    Raises:
        ModesError: pytest exited with a status other than 0 or 1 (no tests run, usage error), naming the
            mode and its log file.
    """
    report = out / "modes" / name
    report.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    calls = {k: v for k, v in mode.items() if modes[k][0] is not None}
    env.update({k: v for k, v in mode.items() if k not in calls})
    if calls:
        env[CALLABLES_ENV] = json.dumps(calls)
    log = report / "pytest.log"
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as fh:
        code = subprocess.run(_pytest_args(args, report), env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - start
    if code not in (0, 1):
        raise ModesError(f"mode {name}: pytest exited with status {code} (see {log})", tail=_log_tail(log))
    records = read_records(report)
    return {
        "mode": name,
        "settings": dict(mode),
        "wall_s": round(wall, 2),
        "exit_code": code,
        "tests": len(records),
        "outcomes": dict(Counter(r["outcome"] for r in records)),
        "records": records,
    }


def combine(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per test of the baseline run (and of any other): ``passed`` when every mode agrees with the
    baseline, else ``failed`` with class ``mode-difference``, its message naming both modes."""
    base = runs[0]
    found: dict[str, list[str]] = {}
    for other in runs[1:]:
        for nodeid, text in differences(base["records"], other["records"], base["mode"], other["mode"]).items():
            found.setdefault(nodeid, []).append(text)
    by_id: dict[str, dict] = {}
    for run in reversed(runs):
        by_id.update({r["nodeid"]: r for r in run["records"]})
    out = []
    for nodeid in sorted(by_id):
        r = by_id[nodeid]
        rec = {
            "schema": SCHEMA,
            "suite": r.get("suite"),
            "nodeid": nodeid,
            "kind": r.get("kind"),
            "op": r.get("op"),
            "variant": r.get("variant"),
            "dtype": r.get("dtype"),
            "modes": [run["mode"] for run in runs],
            "worker": "modes",
            "time": time.time(),
        }
        if nodeid in found:
            rec.update(outcome="failed", failure_class=MODE_DIFFERENCE, message="; ".join(found[nodeid])[:2000])
        else:
            rec.update(outcome="passed", message="")
        out.append(rec)
    return out


def make_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m neuron_conformance.conformance.backend.modes``."""
    p = argparse.ArgumentParser(
        prog="python -m neuron_conformance.conformance.backend.modes",
        description="Run suites in each declared execution mode of the backend and flag differences between modes",
    )
    p.add_argument("--suite", action="append", required=True, help="a suite file (repeatable)")
    p.add_argument("--ops", "--conformance-ops", help="--conformance-ops of the runs")
    p.add_argument("--dtypes", "--conformance-dtypes", help="--conformance-dtypes of the runs")
    p.add_argument("--device", "--conformance-device", help="--conformance-device of the runs")
    p.add_argument(
        "--backend-module",
        "--conformance-backend-module",
        help="--conformance-backend-module of the runs (its CONFORMANCE_MODES are used)",
    )
    p.add_argument("--emulator-mode", "--conformance-emulator-mode", help="--conformance-emulator-mode of the runs")
    p.add_argument("--setting", action="append", default=[], help="vary only this declared setting (repeatable)")
    p.add_argument(
        "--report-dir", "--conformance-report-dir", default="reports/modes", help="where the runs and the report go"
    )
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the differential run (module docstring); returns the exit status."""
    args = make_parser().parse_args(argv)
    out = Path(args.report_dir)
    try:
        modes = declared_modes(args.backend_module, args.device)
        if not modes:
            print(
                f"neuron_conformance.conformance.backend.modes: the device under test ({args.device or 'default'}) declares no "
                f"execution modes ({HOOK}): nothing to compare"
            )
            return 0
        todo = plan(modes, args.setting)
        runs = []
        for mode in todo:
            name = label(mode, todo[0])
            runs.append(run_mode(args, modes, mode, name, out))
            print(
                f"neuron_conformance.conformance.backend.modes: {name}: {runs[-1]['tests']} tests in {runs[-1]['wall_s']} s "
                f"{runs[-1]['outcomes']}"
            )
    except ModesError as exc:
        print(f"neuron_conformance.conformance.backend.modes: {exc}", file=sys.stderr)
        if exc.tail:
            print(f"  last lines of its log:\n{exc.tail}", file=sys.stderr)
        return 2
    records = combine(runs)
    (out / "records").mkdir(parents=True, exist_ok=True)
    (out / "records" / "modes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    n_diff = sum(1 for r in records if r["outcome"] == "failed")
    base_run = out / "modes" / runs[0]["mode"] / "run.json"
    run_meta = json.loads(base_run.read_text(encoding="utf-8")) if base_run.is_file() else {}
    run_meta.update(complete=True, argv=list(argv if argv is not None else sys.argv[1:]))
    write_json_atomic(out / "run.json", run_meta)
    write_json_atomic(
        out / "modes.json",
        {
            "settings": {k: v[1] for k, v in modes.items()},
            "compared": len(records),
            "differences": n_diff,
            "runs": [{k: v for k, v in r.items() if k != "records"} for r in runs],
        },
    )
    subprocess.run([sys.executable, "-m", "neuron_conformance.reports", "build", str(out)], stdout=subprocess.DEVNULL)
    print(
        f"neuron_conformance.conformance.backend.modes: {len(records)} tests compared across {len(runs)} modes: {n_diff} mode-difference(s); "
        f"report {out}"
    )
    return 1 if n_diff else 0


if __name__ == "__main__":
    sys.exit(main())
