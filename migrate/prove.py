"""``neuron-migrate prove SCRIPT -- ARGS``: proof of a fix by running it.

The script's folder is copied twice into a temporary folder (the user's files are only read). In the second
copy every Python file is fixed (``--fix --unsafe-fixes`` unless ``--safe-only``). Then, each in a child
process started with the same interpreter and seeds fixed (:mod:`neuron_conformance.migrate.prove_probe`):

1. the original runs on the CPU (``CUDA_VISIBLE_DEVICES`` empty, no emulated device), where the CUDA calls
   that change no value (``torch.cuda.synchronize()``, ``empty_cache()``, ...) are counted no-ops, named in
   the output (:data:`neuron_conformance.migrate.prove_probe.NO_EFFECT`);
2. the fixed copy runs on the accelerator: a real one when this interpreter sees one, else the emulated
   ``neuron`` device, installed at ``import torch`` in every process the script starts
   (``CONFORMANCE_EMULATOR=mirror``, the emulator's ``torch.backends`` entry point), with one random stream
   for host and device (``CONFORMANCE_EMULATOR_RNG=host``): a dropout or a sampling step that moved to the
   device draws the numbers the original drew on the CPU, so only the rewrite can make the runs differ. A
   real accelerator has a generator of its own; a script that draws on it can differ there for that reason
   alone, and the verdict line says so.

What both printed, and the checkpoints both wrote, are compared (:mod:`neuron_conformance.migrate.prove_compare`).
The verdict is one of: ``same``; ``differs at <where>``; ``the fixed script did not reach the device`` (no
process of the fixed run allocated memory on the accelerator); that the original printed and saved nothing
on the CPU while the fixed copy did (a script that works only over its CUDA devices); or that a run failed. Exit code 0 for
``same``, 1 for any other verdict, 2 for bad input (a missing or unparsable script, bad options).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

from neuron_conformance.migrate import prove_compare
from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.files import read_source, write_atomic
from neuron_conformance.migrate.prove_probe import CPU_ENV, REPORT_ENV
from neuron_conformance.migrate.registry import selection

#: The largest script folder ``prove`` copies (bytes): the copy is made twice.
MAX_FOLDER_BYTES = 200 * 1024 * 1024
_SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache"}
SAME = "same"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b(:|$)")
NOT_REACHED = "the fixed script did not reach the device"
NOTHING_ON_CPU = (
    "the original printed and saved nothing on the CPU (its work may need CUDA, such as a loop over CUDA devices)"
)


class ProveError(Exception):
    """Bad input for ``prove`` (exit code 2); the message says what and what to do."""


@dataclasses.dataclass
class Run:
    """One run of a script: its exit code (None when it ran past the time limit), what it printed, the
    checkpoints it wrote (relative paths) and the accelerator memory its processes allocated."""

    returncode: Optional[int]
    stdout: str
    stderr: str
    checkpoints: List[str]
    device: Optional[str] = None
    device_bytes: int = 0
    no_ops: dict = dataclasses.field(default_factory=dict)

    def failure(self) -> str:
        if self.returncode is None:
            return "ran past the time limit"
        lines = [s.strip() for s in self.stderr.strip().splitlines() if s.strip()]
        raised = [s for s in lines if _EXCEPTION_LINE.match(s)]  # the traceback's last line, not a long message's
        last = raised[-1] if raised else lines[-1] if lines else ""
        return f"exit code {self.returncode}" + (f": {last[:200]}" if last else "")


def add_args(sub) -> None:
    """The ``prove`` sub-command's options."""
    p = sub.add_parser("prove", help="Run a script before and after its fix and compare what it prints and saves")
    p.add_argument("script", help="The script to prove (its folder is copied; the files are only read)")
    p.add_argument(
        "script_args",
        nargs=argparse.REMAINDER,
        help="Arguments for the script, after -- (prove's own options may come between SCRIPT and --)",
    )
    _add_options(p)


def _add_options(p) -> None:
    p.add_argument("--safe-only", action="store_true", help="Apply safe fixes only (default: safe and unsafe)")
    p.add_argument("--timeout", type=float, default=600.0, help="Seconds each run may take (default 600)")
    p.add_argument("--rtol", type=float, default=1e-4, help="Relative tolerance for numbers (default 1e-4)")
    p.add_argument(
        "--atol",
        type=float,
        default=1e-5,
        help="Absolute tolerance for numbers (default 1e-5, torch.testing.assert_close's for float32)",
    )
    p.add_argument("--ignore", action="append", default=[], type=_pattern, help="Regex of printed lines not to compare")
    p.add_argument(
        "--mask", action="append", default=[], type=_pattern, help="Regex of printed text not to compare (repeatable)"
    )
    p.add_argument(
        "--cpu-args",
        default=None,
        help="Arguments for the original's CPU run when they differ from the script's (a shell-quoted string, "
        'given as --cpu-args="--device=cpu" when it starts with -), for a script whose default or switch selects CUDA',
    )
    p.add_argument("--keep", action="store_true", help="Keep the temporary copies and print where they are")


class _OptionsParser(argparse.ArgumentParser):
    def error(self, message):
        raise ProveError(f"prove: {message} (prove's options between SCRIPT and --)")


def split_options(args: List[str], opts) -> List[str]:
    """The script's arguments from ``args`` (what follows SCRIPT): with a ``--``, what comes before it are
    prove's own options (``prove train.py --cpu-args "..." -- --epochs 1``), merged into ``opts``; without
    one, every argument is the script's.

    Raises:
        ProveError: an option before ``--`` that prove does not know.
    """
    if "--" not in args:
        return list(args)
    cut = args.index("--")
    before, after = args[:cut], args[cut + 1 :]
    if before:
        parser = _OptionsParser(prog="neuron-migrate prove", add_help=False)
        _add_options(parser)
        given = parser.parse_args(before)
        for action in parser._actions:
            value = getattr(given, action.dest)
            if value == action.default:
                continue
            if isinstance(value, list):
                value = list(getattr(opts, action.dest, None) or []) + value
            setattr(opts, action.dest, value)
    return after


def _pattern(text: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"--ignore {text!r}: not a regular expression ({exc})") from None


def _folder_size(folder: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        total += sum((Path(root) / f).stat().st_size for f in files if (Path(root) / f).is_file())
        if total > MAX_FOLDER_BYTES:
            break
    return total


def _copy(folder: Path, dest: Path) -> None:
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns(*_SKIP_DIRS), symlinks=True)


def fix_tree(root: Path, settings: Settings) -> List[str]:
    """Fix every Python file under ``root`` in place (a temporary copy); returns ``"<file>: <error>"`` for the
    files the tool could not fix."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text, encoding, _ = read_source(path)
        except Exception as exc:  # noqa: BLE001 - an unreadable sibling file is reported, not fatal
            problems.append(f"{path.relative_to(root)}: {exc}")
            continue
        result = check_source(text, settings, str(path))
        if result.error:
            problems.append(f"{path.relative_to(root)}: {result.error}")
        if result.new_source is not None:
            write_atomic(path, result.new_source, encoding)
    return problems


def _snapshot(root: Path) -> dict:
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in prove_compare.CHECKPOINT_SUFFIXES:
            st = path.stat()
            out[str(path.relative_to(root))] = (st.st_mtime_ns, st.st_size)
    return out


def _emulated_device_declared() -> bool:
    """Whether an installed distribution declares a ``torch.backends`` entry point that ``$CONFORMANCE_EMULATOR``
    turns on (this project's, registered when it is installed)."""
    from importlib.metadata import entry_points

    return any(ep.name == "conformance-emulator" for ep in entry_points(group="torch.backends"))


def real_accelerator(env: dict) -> Optional[str]:
    """The device type of an accelerator a fresh interpreter with ``env`` can use, or None. Asked in a child
    process: this one may have a device installed in-process (a test session's emulated device) that the
    script's runs would not have."""
    probe = "import torch; a = torch.accelerator.current_accelerator(check_available=True); print(a.type if a else '')"
    try:
        proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None
    found = proc.stdout.strip().splitlines()
    return found[-1] if proc.returncode == 0 and found and found[-1] else None


def _environments(work: Path) -> tuple:
    """``(cpu env, device env, real accelerator type or None)`` for the two runs."""
    import neuron_conformance  # deferred: only to find the folder that makes the package importable in the runs

    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import neuron_conformance.migrate.prove_probe  # noqa: F401\n")
    root = str(Path(neuron_conformance.__file__).resolve().parents[1])
    base = {
        k: v for k, v in os.environ.items() if k not in ("CONFORMANCE_EMULATOR", "CONFORMANCE_EMULATOR_RNG", REPORT_ENV)
    }
    base.pop(CPU_ENV, None)
    base["PYTHONHASHSEED"] = "0"
    base.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    paths = [str(site), root] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else [])
    cpu = dict(base, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join(paths), **{CPU_ENV: "1"})
    device = dict(base, PYTHONPATH=os.pathsep.join(paths))
    real = real_accelerator(device)
    if real is None:
        if not _emulated_device_declared():
            raise ProveError(
                "no accelerator here and no emulated device declared: reinstall this project (`pip install -e .`) "
                "so that torch finds its `torch.backends` entry point"
            )
        device["CONFORMANCE_EMULATOR"] = "mirror"
        device["CONFORMANCE_EMULATOR_RNG"] = "host"
    return cpu, device, real


def run_once(script: Path, args: List[str], env: dict, timeout: float, report: Path) -> Run:
    """Run ``script`` (in its own folder) through the probe; collects output, checkpoints and device use."""
    report.mkdir(parents=True, exist_ok=True)
    env = dict(env, **{REPORT_ENV: str(report)})
    before = _snapshot(script.parent)
    cmd = [sys.executable, "-m", "neuron_conformance.migrate.prove_probe", str(script), *args]
    try:
        proc = subprocess.run(
            cmd, cwd=script.parent, env=env, capture_output=True, text=True, timeout=timeout, errors="replace"
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
    after = _snapshot(script.parent)
    written = sorted(k for k, v in after.items() if before.get(k) != v)
    run = Run(code, out, err, written)
    for item in report.glob("*.json"):
        try:
            data = json.loads(item.read_text())
        except (OSError, ValueError):
            continue
        for name, count in (data.get("no_ops") or {}).items():
            run.no_ops[name] = run.no_ops.get(name, 0) + int(count)
        if data.get("device") and not str(data["device"]).startswith("error"):
            run.device = data["device"]
            run.device_bytes += int(data.get("bytes") or 0)
    return run


def verdict(original: Run, fixed: Run, rtol: float, atol: float, ignore=(), mask=()) -> str:
    """The verdict line for two finished runs (see the module docstring)."""
    if original.returncode != 0:
        return f"the original did not run on the CPU ({original.failure()}); nothing to compare"
    if fixed.returncode != 0:
        return f"the fixed script failed on the device ({fixed.failure()})"
    if not fixed.device_bytes:
        return NOT_REACHED
    if not original.stdout.strip() and not original.checkpoints and (fixed.stdout.strip() or fixed.checkpoints):
        return f"{NOTHING_ON_CPU}: nothing to compare"
    where = prove_compare.compare_output(original.stdout, fixed.stdout, rtol, atol, ignore, mask)
    if where is None and set(original.checkpoints) != set(fixed.checkpoints):
        only = sorted(set(original.checkpoints) ^ set(fixed.checkpoints))
        where = f"checkpoints written: {only[:3]} by one run only"
    if where is None:
        return SAME
    return f"differs at {where}"


def check_options(opts) -> None:
    """Refuse tolerances that are negative or not numbers, a time limit that is not positive and
    ``--cpu-args`` that a shell could not split.

    Raises:
        ProveError: naming the option.
    """
    import math

    for name in ("rtol", "atol"):
        value = getattr(opts, name)
        if not math.isfinite(value) or value < 0:
            raise ProveError(f"--{name} {value}: a tolerance must be a finite number >= 0")
    if not math.isfinite(opts.timeout) or opts.timeout <= 0:
        raise ProveError(f"--timeout {opts.timeout}: give a number of seconds > 0")
    if opts.cpu_args is not None:
        try:
            shlex.split(opts.cpu_args)
        except ValueError as exc:
            raise ProveError(f"--cpu-args {opts.cpu_args!r}: {exc}") from None


def prove(script: str, args: List[str], opts, stdout, stderr) -> int:
    """Run the proof (see the module docstring); returns the exit code."""
    path = Path(script)
    if not path.is_file():
        raise ProveError(f"cannot read {script!r}: no such file; give the path of a Python script")
    try:
        text = read_source(path)[0]
    except Exception as exc:  # noqa: BLE001 - any unreadable input is a usage error
        raise ProveError(f"cannot read {script!r}: {exc}") from None
    args = split_options(args, opts)
    check_options(opts)
    settings = Settings(selection(None, None), fix=True, unsafe_fixes=not opts.safe_only)
    first = check_source(text, settings, script)
    if first.error and first.error.startswith("cannot parse"):
        raise ProveError(f"{script}: {first.error}; prove needs a script that Python can parse")
    folder = path.resolve().parent
    if _folder_size(folder) > MAX_FOLDER_BYTES:
        raise ProveError(
            f"{folder} holds more than {MAX_FOLDER_BYTES // 2**20} MiB; move the script into a smaller folder"
        )
    work = Path(tempfile.mkdtemp(prefix="neuron-migrate-prove-"))
    try:
        _copy(folder, work / "original")
        _copy(folder, work / "fixed")
        problems = fix_tree(work / "fixed", settings)
        for p in problems:
            stderr.write(f"neuron-migrate prove: not fixed: {p}\n")
        cpu_env, device_env, real = _environments(work)
        name = path.name
        target = real or "neuron (emulated, one random stream with the host)"
        stdout.write(f"prove {script}: original on cpu, fixed on {target}\n")
        t0 = time.monotonic()
        cpu_args = args if opts.cpu_args is None else shlex.split(opts.cpu_args)
        original = run_once(work / "original" / name, cpu_args, cpu_env, opts.timeout, work / "report-original")
        fixed = run_once(work / "fixed" / name, args, device_env, opts.timeout, work / "report-fixed")
        line = verdict(original, fixed, opts.rtol, opts.atol, opts.ignore, opts.mask)
        if real and line.startswith("differs at"):
            line += f" ({real} has a random generator of its own: draws made on it can differ for that reason alone)"
        if line == SAME and original.checkpoints:
            where = prove_compare.compare_checkpoints(
                work / "original", work / "fixed", original.checkpoints, opts.rtol, opts.atol
            )
            line = SAME if where is None else f"differs at {where}"
        used = f"{fixed.device_bytes} bytes on {fixed.device}" if fixed.device_bytes else "nothing on the device"
        no_ops = ", ".join(f"{name} x{count}" for name, count in sorted(original.no_ops.items()))
        if no_ops:
            stdout.write(f"  original on the cpu: no-ops there (they change no value): {no_ops}\n")
        stdout.write(
            f"  original: {original.failure() if original.returncode else 'ran'}, "
            f"{len(original.stdout.splitlines())} lines, {len(original.checkpoints)} checkpoints\n"
            f"  fixed: {fixed.failure() if fixed.returncode else 'ran'}, {len(fixed.stdout.splitlines())} lines, "
            f"{len(fixed.checkpoints)} checkpoints, {used} ({time.monotonic() - t0:.1f} s)\n"
        )
        stdout.write(f"verdict: {line}\n")
        if opts.keep:
            stdout.write(f"copies kept in {work}\n")
        return 0 if line == SAME else 1
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)
