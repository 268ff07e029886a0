"""``neuron-migrate``: command-line interface.

``neuron-migrate [check] PATH... [--fix] [--unsafe-fixes] [--diff] [--select/--ignore CODES]
[--output-format full|concise|json|sarif|github] [--target-torch X.Y] [-j N] [--exclude GLOB]``,
``neuron-migrate rule NM101``, ``neuron-migrate rules``.

Exit codes: 0 no findings left; 1 findings left, changes shown by ``--diff``, or files skipped
(do not parse, not UTF-8, binary, symlink out of the tree); 2 usage, configuration or
internal error (also a rule or fix that raised on one file: that file is named, left
unchanged and counted as errored; the other files are still processed).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import difflib
import os
import sys
import traceback
from pathlib import Path
from typing import List, Optional, Sequence

from neuron_conformance.migrate import __version__, config, files, output, prove, registry
from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.rule import SAFE, UNSAFE, Violation

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
COMMANDS = ("check", "rule", "rules", "prove")


class UsageError(Exception):
    """Bad command line or configuration; the message names the flag or key."""


def _codes(value: str) -> List[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


def _version(value: str) -> tuple:
    try:
        major, minor = value.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--target-torch {value!r}: expected MAJOR.MINOR such as 2.13")


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"-j {value!r}: expected a positive integer")
    if n < 1:
        raise argparse.ArgumentTypeError(f"-j {value!r}: expected a positive integer")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuron-migrate",
        description="Find CUDA-specific PyTorch idioms and rewrite them to device-generic ones "
        "(torch.accelerator, torch.amp, torch.Event), as ruff finds and fixes lint.",
    )
    parser.add_argument("--version", action="version", version=f"neuron-migrate {__version__}")
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser("check", help="Check (and fix) files; the default command")
    check.add_argument("paths", nargs="*", default=["."], help="Files or directories (default: .)")
    check.add_argument("--fix", action="store_true", default=None, help="Apply safe fixes")
    check.add_argument(
        "--unsafe-fixes", action="store_true", default=None, help="Also apply unsafe fixes (with --fix or --diff)"
    )
    check.add_argument("--diff", action="store_true", help="Print the fixes as a unified diff; write nothing")
    check.add_argument("--select", type=_codes, default=None, help="Rule codes or prefixes to run (default ALL)")
    check.add_argument("--ignore", type=_codes, default=None, help="Rule codes or prefixes to skip")
    check.add_argument("--output-format", choices=output.FORMATS, default=None, help="Output format (default full)")
    check.add_argument(
        "--target-torch",
        type=_version,
        default=None,
        help="Oldest torch the code must run on; rules needing newer are skipped (default 2.13)",
    )
    check.add_argument("-j", "--jobs", type=_jobs, default=None, help="Worker processes (default: CPU count)")
    check.add_argument(
        "--exclude", action="append", default=None, help="Glob to exclude (repeatable; replaces the defaults)"
    )
    check.add_argument("--extend-exclude", action="append", default=[], help="Glob to exclude in addition")
    check.add_argument("--config", type=Path, default=None, help="pyproject.toml to read (default: nearest)")
    check.add_argument("--no-config", action="store_true", help="Ignore pyproject.toml")
    check.add_argument("--quiet", "-q", action="store_true", help="Print findings only, no summary")
    r = sub.add_parser("rule", help="Show the documentation of a rule")
    r.add_argument("code", help="Rule code, e.g. NM101")
    sub.add_parser("rules", help="List every rule")
    prove.add_args(sub)
    return parser


@dataclasses.dataclass
class FileOutcome:
    path: str
    violations: List[Violation]
    fixed: int = 0
    changed: bool = False
    diff: str = ""
    skipped: Optional[str] = None
    source: Optional[str] = None
    errored: bool = False  # ``skipped`` is a tool error (a rule or fix raised), not bad input


def process_file(path: str, settings: Settings, write: bool, want_diff: bool, want_source: bool) -> FileOutcome:
    """Check one file; with ``write`` replace it atomically when the fixed text differs."""
    p = Path(path)
    try:
        text, encoding, newline = files.read_source(p)
    except files.SkipFile as exc:
        return FileOutcome(path, [], skipped=str(exc))
    if not files.may_have_findings(text):
        return FileOutcome(path, [])
    result = check_source(text, settings, path)
    if result.error:
        return FileOutcome(
            path, result.violations, skipped=result.error, source=text if want_source else None, errored=result.internal
        )
    out = FileOutcome(path, result.violations, fixed=result.fixed)
    new = result.new_source
    if new is not None and new != text:
        out.changed = True
        if want_diff:
            out.diff = "".join(
                difflib.unified_diff(
                    text.splitlines(True),
                    new.splitlines(True),
                    fromfile=f"a/{path.lstrip('/')}",
                    tofile=f"b/{path.lstrip('/')}",
                )
            )
        if write:
            try:
                files.write_atomic(p, new, encoding)
            except OSError as exc:
                out.skipped = f"cannot write: {exc}"
    if want_source:  # the findings left are positioned in the fixed text (--fix and --diff alike)
        out.source = new if new is not None else text
    return out


def _run_batch(paths, settings, write, want_diff, want_source):
    return [process_file(p, settings, write, want_diff, want_source) for p in paths]


def run_check(args, stdout, stderr) -> int:
    cfg = {}
    if not args.no_config:
        cfg_path = args.config or config.find_pyproject(Path(args.paths[0] if args.paths else "."))
        cfg = config.load(cfg_path)
    fix = args.fix if args.fix is not None else cfg.get("fix", False)
    unsafe = args.unsafe_fixes if args.unsafe_fixes is not None else cfg.get("unsafe-fixes", False)
    fmt = args.output_format or cfg.get("output-format", "full")
    if fmt not in output.FORMATS:
        raise UsageError(f"output-format {fmt!r} not in {output.FORMATS}")
    target = args.target_torch or _version(cfg.get("target-torch", "2.13"))
    try:
        selected = registry.selection(
            args.select or cfg.get("select"), (args.ignore or []) + cfg.get("ignore", []), target
        )
    except ValueError as exc:
        raise UsageError(f"--select/--ignore: {exc}")
    settings = Settings(selected=selected, fix=bool(fix or args.diff), unsafe_fixes=bool(unsafe))
    write = bool(fix) and not args.diff
    exclude = args.exclude or cfg.get("exclude") or ()
    try:
        paths, skipped_paths = files.discover(
            args.paths, exclude, list(args.extend_exclude) + cfg.get("extend-exclude", [])
        )
    except FileNotFoundError as exc:
        raise UsageError(str(exc))
    want_source = fmt == "full"
    names = [str(p) for p in paths]
    jobs = args.jobs or os.cpu_count() or 1
    outcomes: List[FileOutcome] = []
    if jobs == 1 or len(names) < 16:
        outcomes = _run_batch(names, settings, write, args.diff, want_source)
    else:
        chunk = max(4, min(64, len(names) // (jobs * 8) or 1))
        with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(_run_batch, list(batch), settings, write, args.diff, want_source)
                for batch in files.iter_chunks(names, chunk)
            ]
            for fut in futures:
                outcomes.extend(fut.result())
    violations = sorted((v for o in outcomes for v in o.violations), key=lambda v: (v.path, v.line, v.column, v.code))
    skipped = list(skipped_paths) + [(o.path, o.skipped) for o in outcomes if o.skipped]
    sources = {o.path: o.source for o in outcomes if o.source is not None}
    if args.diff:
        for o in outcomes:
            if o.diff:
                stdout.write(o.diff)
    if fmt == "json":
        stdout.write(output.to_json(violations, skipped) + "\n")
    elif fmt == "sarif":
        stdout.write(output.to_sarif(violations, skipped) + "\n")
    elif fmt == "github":
        stdout.write(output.to_github(violations, skipped))
    elif not args.diff or violations:
        if fmt == "concise":
            for v in violations:
                stdout.write(output.concise_line(v) + "\n")
        else:
            output.write_full(stdout, violations, sources, color=stdout.isatty())
    errored = {o.path for o in outcomes if o.errored}
    if fmt in ("full", "concise"):
        for path, reason in skipped:
            stderr.write(f"{path}: {'error' if path in errored else 'skipped'}: {reason}\n")
        if not args.quiet:
            _summary(stdout, violations, outcomes, fix=write, diff=args.diff, unsafe=unsafe)
    else:  # machine formats carry the reason; the tool error still gets its one line on stderr
        for path in sorted(errored):
            stderr.write(f"{path}: error: {next(o.skipped for o in outcomes if o.path == path)}\n")
    changed = any(o.changed for o in outcomes)
    if errored:
        return EXIT_ERROR
    if violations or skipped or (args.diff and changed):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _summary(out, violations, outcomes, fix, diff, unsafe):  # noqa: ARG001
    fixed = sum(o.fixed for o in outcomes)
    n = len(violations)
    safe = sum(v.fix_applicability == SAFE for v in violations)
    unsafe_n = sum(v.fix_applicability == UNSAFE for v in violations)
    if fix:
        out.write(
            f"Fixed {fixed} finding{'s' * (fixed != 1)} in {sum(o.changed for o in outcomes)} file(s); {n} remaining.\n"
        )
    elif diff:
        out.write(f"Would fix {fixed} finding{'s' * (fixed != 1)} in {sum(o.changed for o in outcomes)} file(s).\n")
    elif n:
        out.write(f"Found {n} finding{'s' * (n != 1)}.\n")
    elif not any(o.errored for o in outcomes):
        out.write("All checks passed.\n")
    errored = sum(o.errored for o in outcomes)
    if errored:
        out.write(
            f"{errored} file{'s' * (errored != 1)} not checked: neuron-migrate failed on "
            f"{'them' if errored != 1 else 'it'} (tool error, named above); findings in "
            f"{'them' if errored != 1 else 'it'} are not counted.\n"
        )
    if not fix and not diff and (safe or unsafe_n):
        msg = f"[*] {safe} fixable with --fix"
        if unsafe_n:
            msg += f"; [~] {unsafe_n} more with --fix --unsafe-fixes"
        out.write(msg + ".\n")


def run_rule(code: str, stdout) -> int:
    registry.load()
    code = code.strip().upper()
    if code not in registry.RULES:
        raise UsageError(f"unknown rule code {code!r}; run `neuron-migrate rules` for the list")
    stdout.write(registry.RULES[code].render_doc() + "\n")
    return EXIT_CLEAN


def run_rules(stdout) -> int:
    rules = registry.load()
    for code in sorted(rules):
        r = rules[code]
        stdout.write(f"{code}  {r.name:<34} {r.applicability:<7} {r.family}\n")
    return EXIT_CLEAN


def main(argv: Optional[Sequence[str]] = None, stdout=None, stderr=None) -> int:
    """Entry point of the ``neuron-migrate`` console script. Returns the exit code."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["check"] + argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_CLEAN if exc.code == 0 else EXIT_ERROR
    try:
        if args.command == "rule":
            return run_rule(args.code, stdout)
        if args.command == "rules":
            return run_rules(stdout)
        if args.command == "prove":
            return prove.prove(args.script, args.script_args, args, stdout, stderr)
        return run_check(args, stdout, stderr)
    except (UsageError, config.ConfigError, prove.ProveError) as exc:
        stderr.write(f"neuron-migrate: error: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_ERROR
    except BrokenPipeError:  # output piped into `head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_ERROR
    except Exception as exc:  # internal error: say so, exit 2
        traceback.print_exc(file=stderr)
        stderr.write(f"neuron-migrate: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
