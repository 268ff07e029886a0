"""Every option of the conformance plugin: flag, environment variable, ``[tool.conformance]`` key, default.

Precedence: command line, then environment variable, then ``[tool.conformance]`` in the ``pyproject.toml``
of pytest's rootdir, then the default below. Each default is defined once, in :data:`OPTIONS`; the README
table and ``--help`` are generated from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from neuron_conformance.conformance.backend.budget import BudgetError, parse_budget_option
from neuron_conformance.conformance.verdict.float8_formats import FLOAT8_NAMES, available_names, missing_message

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FLOAT_DTYPES = ("float32", "bfloat16", "float16")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "bool")
DEFAULT_DTYPES = FLOAT_DTYPES + INT_DTYPES
"""Default dtypes under test: no float64 or complex (Trainium has no fp64), unless asked."""

FLOAT8_DTYPES = available_names()
"""The float8 dtypes this torch defines (:mod:`neuron_conformance.conformance.verdict.float8_formats`): not in the default
set, selected by name or by ``all``; their tests need the ``float8`` capability."""

KNOWN_DTYPES = DEFAULT_DTYPES + ("float64", "complex64", "complex128", "uint16", "uint32", "uint64") + FLOAT8_DTYPES


class OptionError(ValueError):
    """An option has a value that cannot be used; the message names the flag and env var."""


def _parse_dtypes(value: str) -> tuple[str, ...]:
    if value.strip() == "all":
        return KNOWN_DTYPES
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise OptionError("an empty dtype list")
    for n in names:
        if n in FLOAT8_NAMES and n not in KNOWN_DTYPES:
            raise OptionError(missing_message(n))
        if n not in KNOWN_DTYPES:
            raise OptionError(f"unknown dtype {n!r}; accepted: {', '.join(KNOWN_DTYPES)} or 'all'")
    return names


EMULATOR_MODES = ("mirror", "device", "alternate")
"""The emulated device's numeric modes (docs/harness.md): the CPU's kernels bitwise, composites decomposed as
on an accelerator, and correct kernels that compute differently from the CPU."""


def _parse_mode(value: str) -> str:
    if value not in EMULATOR_MODES:
        raise OptionError(f"{value!r} is not an emulator mode; accepted: {', '.join(EMULATOR_MODES)}")
    return value


def _parse_nonneg_int(value: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise OptionError(f"{value!r} is not an integer") from None
    if n < 0:
        raise OptionError(f"{n} is negative")
    return n


def _parse_seconds(value: str) -> float:
    try:
        s = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"{value!r} is not a number of seconds") from None
    if s < 0:
        raise OptionError(f"{s} is negative")
    return s


def _parse_ops(value) -> frozenset:
    if isinstance(value, (list, tuple)):
        names = [str(v) for v in value]
    elif str(value).startswith("@"):
        path = Path(str(value)[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OptionError(f"cannot read the op list {path}: {exc}") from None
        names = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    else:
        names = str(value).split(",")
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise OptionError("an empty op list")
    return frozenset(names)


def _parse_bool(value) -> bool:
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise OptionError(f"{value!r} is not a boolean (use 1/0, true/false)")


def _parse_activate(value) -> str:
    """``--conformance``: auto, on or off; a boolean (1/0, true/false, yes/no, a TOML boolean) is on/off."""
    v = str(value).strip().lower()
    if v in ("auto", "on", "off"):
        return v
    try:
        return "on" if _parse_bool(v) else "off"
    except OptionError:
        raise OptionError(f"{value!r} is not one of: auto, on, off (or a boolean)") from None


def _parse_timeouts(value) -> dict:
    """``"300,distributed=900"`` -> ``{None: 300.0, "distributed": 900.0}`` (None: every other suite; 0: none)."""
    spec: dict = {}
    for part in str(value).split(","):
        part = part.strip()
        if not part:
            continue
        suite, sep, secs = part.rpartition("=")
        key = suite.strip() if sep else None
        if sep and not key:
            raise OptionError(f"{part!r} has no suite name before '='")
        try:
            spec[key] = _parse_seconds(secs.strip())
        except OptionError as exc:
            raise OptionError(f"timeout {part!r}: {exc}; expected SECONDS or SUITE=SECONDS, comma-separated") from None
    if not spec:
        raise OptionError("an empty timeout list")
    return spec


def _parse_choice(*choices: str):
    def parse(value) -> str:
        v = str(value).strip().lower()
        if v not in choices:
            raise OptionError(f"{value!r} is not one of: {', '.join(choices)}")
        return v

    return parse


def _parse_positive_int(value: str) -> int:
    n = _parse_nonneg_int(value)
    if n == 0:
        raise OptionError("0 is not a positive integer")
    return n


def _parse_shard_id(value: str) -> int:
    """``--conformance-shard-id``: an integer >= 0 (checked against ``--conformance-num-shards`` by ``neuron_conformance.conformance.pytest_plugin.sharding``)."""
    try:
        return _parse_nonneg_int(value)
    except OptionError as exc:
        raise OptionError(f"{exc}; accepted: a shard id from 0 to --conformance-num-shards minus 1") from None


def _parse_num_shards(value: str) -> int:
    """``--conformance-num-shards``: an integer >= 1."""
    try:
        return _parse_positive_int(value)
    except OptionError as exc:
        raise OptionError(f"{exc}; accepted: an integer >= 1") from None


def _parse_budget(value) -> int | str:
    try:
        return parse_budget_option(value)
    except BudgetError as exc:
        raise OptionError(f"{exc}; or 'auto'") from None


@dataclass(frozen=True)
class Option:
    """One plugin option. ``dest`` is the attribute name; ``flag`` the command-line flag."""

    dest: str
    flag: str
    env: str
    key: str
    default: Any
    help: str
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    is_flag: bool = False

    @property
    def argdest(self) -> str:
        """The attribute of pytest's ``config.option`` that holds the flag's value: ``conformance_<dest>``,
        prefixed like the flag, so another plugin's ``--device`` (default dest ``device``) never writes
        into this plugin's value or reads it."""
        return f"conformance_{self.dest}"


# fmt: off
OPTIONS: tuple[Option, ...] = (
    Option("activate", "--conformance", "CONFORMANCE_ACTIVATE", "activate", "auto",
           "Whether this pytest session is a conformance session: on (opt in, e.g. a backend's own tests), "
           "off (opt out), or auto: only when it collects the harness's suites (opsuites, model_zoo; "
           "neuron_conformance.conformance.pytest_plugin.activation)", parse=_parse_activate, metavar="WHEN"),
    Option("device", "--conformance-device", "CONFORMANCE_DEVICE", "device", None,
           "Device type under test (neuron, cuda, xpu, mps, cpu, ...); default: the current accelerator, "
           "else the emulated neuron device", metavar="TYPE"),
    Option("backend_module", "--conformance-backend-module", "CONFORMANCE_BACKEND_MODULE", "backend-module", None,
           "Module to import that registers the device's backend (e.g. torch_neuronx); default: none for "
           "built-in devices; for an emulated device, the backend module its distribution declares", metavar="MODULE"),
    Option("emulator_mode", "--conformance-emulator-mode", "CONFORMANCE_EMULATOR_MODE", "emulator-mode", "mirror",
           "Numeric mode of the emulated device: mirror (CPU kernels, bitwise), device (decomposes like "
           "a non-CPU device) or alternate (device, with correct kernels that compute differently from the CPU); also exported as the variable to a --conformance-backend-module that wraps the emulator",
           parse=_parse_mode, metavar="MODE"),
    Option("dtypes", "--conformance-dtypes", "CONFORMANCE_DTYPES", "dtypes", ",".join(DEFAULT_DTYPES),
           "Comma-separated dtypes under test, or 'all'", parse=_parse_dtypes, metavar="LIST"),
    Option("manifest", "--conformance-manifest", "CONFORMANCE_MANIFEST", "manifest", None,
           "Expected-failure manifest (TOML) of the backend under test; the emulator's own manifest is "
           "always used for the emulated device", metavar="PATH"),
    Option("report_dir", "--conformance-report-dir", "CONFORMANCE_REPORT_DIR", "report-dir", "reports/latest",
           "Directory for result records and the report", metavar="DIR"),
    Option("seed", "--conformance-seed", "CONFORMANCE_SEED", "seed", "0",
           "Seed given to torch.manual_seed before every test", parse=_parse_nonneg_int, metavar="N"),
    Option("sample", "--conformance-sample", "CONFORMANCE_SAMPLE", "sample", None,
           "Run only the sample input with this index (to replay a failure)", parse=_parse_nonneg_int,
           metavar="N"),
    Option("sample_budget", "--conformance-sample-budget", "CONFORMANCE_SAMPLE_BUDGET", "sample-budget", "2",
           "Seconds a variants, layouts or autograd test spends on its samples before it leaves the rest "
           "out with reason 'time budget' (counted in its record; 0 = every sample). The first usable "
           "sample is always compared", parse=_parse_seconds, metavar="SECONDS"),
    Option("ops", "--conformance-ops", "CONFORMANCE_OPS", "ops", None,
           "Run only these ops/models/scenarios: comma-separated exact names, or =@FILE with one name per "
           "line (# comments allowed; write --conformance-ops=@FILE: pytest expands a separate @FILE argument itself)", parse=lambda v: _parse_ops(v), metavar="NAMES"),
    Option("no_report", "--conformance-no-report", "CONFORMANCE_NO_REPORT", "no-report", False,
           "Do not build the report at the end of the session", parse=_parse_bool, is_flag=True),
    Option("update_manifest", "--conformance-update-manifest", "CONFORMANCE_UPDATE_MANIFEST", "update-manifest", False,
           "Write a proposed manifest (new failures added, passing entries removed) to the report dir",
           parse=_parse_bool, is_flag=True),
    # surviving the backend (neuron_conformance.conformance.survival.crash_files, neuron_conformance.conformance.survival.timeouts, neuron_conformance.conformance.survival.isolation)
    Option("test_timeout", "--conformance-test-timeout", "CONFORMANCE_TEST_TIMEOUT", "test-timeout",
           "300,distributed=900,model_zoo=900",
           "Per-test time limit in seconds: a number for every suite, then SUITE=SECONDS overrides "
           "(0 = no limit); a hung test is recorded as timeout. pytest-timeout's --timeout and "
           "@pytest.mark.timeout win over it", parse=_parse_timeouts, metavar="SPEC"),
    Option("isolate", "--conformance-isolate", "CONFORMANCE_ISOLATE", "isolate", "off",
           "Without xdist: run tests in a child process that is replaced when it crashes: off, process "
           "(one child, restarted after a crash), op (a fresh child per op) or test (a fresh child per test)",
           parse=_parse_choice("off", "process", "op", "test"), metavar="MODE"),
    Option("no_canary", "--conformance-no-canary", "CONFORMANCE_NO_CANARY", "no-canary", False,
           "Do not run the canary op after a failing test (the check that restarts a worker whose device "
           "became unusable)", parse=_parse_bool, is_flag=True),
    # reports
    Option("baseline", "--conformance-baseline", "CONFORMANCE_BASELINE", "baseline", None,
           "An earlier run's summary.json (or report dir): print regressions, fixes, new and removed tests "
           "at the end", metavar="PATH"),
    Option("fail_on_regression", "--conformance-fail-on-regression", "CONFORMANCE_FAIL_ON_REGRESSION",
           "fail-on-regression", False,
           "Exit with status 1 when the --conformance-baseline diff finds a regression (a test that passed now fails)",
           parse=_parse_bool, is_flag=True),
    Option("fail_on_unknown", "--conformance-fail-on-unknown", "CONFORMANCE_FAIL_ON_UNKNOWN", "fail-on-unknown", False,
           "Exit with status 1 when the aten audit leaves overloads with a CPU kernel without a disposition "
           "(unknown), or when aten coverage was not traced", parse=_parse_bool, is_flag=True),
    Option("shard_id", "--conformance-shard-id", "CONFORMANCE_SHARD_ID", "shard-id", None,
           "Run only shard I (0-based) of --conformance-num-shards; an op's tests stay in one shard",
           parse=_parse_shard_id, metavar="I"),
    Option("num_shards", "--conformance-num-shards", "CONFORMANCE_NUM_SHARDS", "num-shards", None,
           "Number of shards the run is split into (with --conformance-shard-id)", parse=_parse_num_shards, metavar="N"),
    Option("shard_durations", "--conformance-shard-durations", "CONFORMANCE_SHARD_DURATIONS", "shard-durations", None,
           "An earlier run's summary.json whose test durations balance the shards", metavar="PATH"),
    Option("aten_coverage", "--conformance-aten-coverage", "CONFORMANCE_ATEN_COVERAGE", "aten-coverage", "auto",
           "Aten coverage tracing: auto (the backend's own op counter when it has one, else off: a "
           "TorchDispatchMode changes behaviour, e.g. drops a conj bit), backend (its counter only), mode "
           "(force the TorchDispatchMode), or off",
           parse=_parse_choice("auto", "backend", "mode", "off"), metavar="MODE"),
    Option("compile_backend", "--conformance-compile-backend", "CONFORMANCE_COMPILE_BACKEND", "compile-backend", None,
           "The torch.compile backend the device_api compile checks, the compile suite and the model zoo's "
           "compile checks (as the default backend) use (a name of torch._dynamo.list_backends()); default: "
           "the one registered under "
           "the device type's name, else the checks' defaults", metavar="NAME"),
    Option("compile_suite", "--conformance-compile-suite", "CONFORMANCE_COMPILE_SUITE", "compile-suite", False,
           "Run the compile suite (opsuites/test_compile.py: every OpInfo sample under torch.compile, about "
           "3 s per (op, dtype) test on the emulator, tens of times compare_cpu's) in a run that collects it "
           "with the other suites; naming "
           "opsuites/test_compile.py (or a test of it) runs it without this flag", parse=_parse_bool,
           is_flag=True),
    Option("memory_budget", "--conformance-memory-budget", "CONFORMANCE_MEMORY_BUDGET", "memory-budget", "auto",
           "Device memory the stress suite's tests may hold at once (bytes, or e.g. 6GiB; 0: none): a test "
           "that needs more is skipped, naming both sizes; auto: the backend module's "
           "CONFORMANCE_MEMORY_BUDGET, else the free memory torch.accelerator.get_memory_info reports",
           parse=_parse_budget, metavar="SIZE"),
    Option("require_native", "--conformance-require-native", "CONFORMANCE_REQUIRE_NATIVE", "require-native", False,
           "Fail a test that passed with aten ops that fell back to the CPU (failure class fallback; needs "
           "the backend's op tracking, CONFORMANCE_OP_TRACKING): for runs that must prove native support",
           parse=_parse_bool, is_flag=True),
    Option("progress", "--conformance-progress", "CONFORMANCE_PROGRESS", "progress", "auto",
           "Live progress display: auto (rich on a terminal, not under -q or -v), rich, or off",
           parse=_parse_choice("auto", "rich", "off"), metavar="MODE"),
)
# fmt: on

BY_DEST = {o.dest: o for o in OPTIONS}

PREFIX = "--conformance-"
"""Every option but ``--conformance`` itself is ``--conformance-<key>``, the way pytest-benchmark prefixes its
own (``--benchmark-*``), so no other plugin's option can clash with one of this plugin's: TorchCTS, for
example, registers ``--device``, and argparse refuses a second registration of a name at start-up."""

RENAMED = {"--" + o.key: o.flag for o in OPTIONS if o.flag.startswith(PREFIX)}
"""The flags before the prefix (``--device``, ``--ops``, ...) -> today's, for the hint of
:func:`renamed_flag_error`."""


def renamed_flag_error(unknown_args) -> str | None:
    """A one-line hint for the first argument pytest did not recognise that is a flag before the prefix
    (``--ops add`` or ``--ops=add``; taken by no other plugin, else pytest would know it), else None.

    Args:
        unknown_args: the arguments no registered option claimed (``Parser.parse_known_and_unknown_args``).
    """
    for arg in unknown_args:
        name = str(arg).split("=", 1)[0]
        if name in RENAMED:
            return (
                f"{name} is no option of the conformance plugin any more; its options are prefixed: "
                f"{RENAMED[name]} (pytest --help, group 'device conformance harness', lists them)"
            )
    return None


def add_options(parser: pytest.Parser) -> None:
    """Register every option in one ``conformance`` group (called from ``pytest_addoption``)."""
    group = parser.getgroup("conformance", "device conformance harness")
    for o in OPTIONS:
        default_txt = o.default if o.default not in (None, False) else "none"
        help_txt = f"{o.help} (env {o.env}; default: {default_txt})"
        if o.is_flag:
            group.addoption(o.flag, dest=o.argdest, action="store_true", default=None, help=help_txt)
        else:
            group.addoption(o.flag, dest=o.argdest, default=None, metavar=o.metavar, help=help_txt)


def _pyproject_table(config: pytest.Config) -> dict:
    cached = getattr(config, "_conformance_pyproject", None)
    if cached is not None:
        return cached
    table: dict = {}
    path = Path(str(config.rootpath)) / "pyproject.toml"
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise OptionError(f"{path}: invalid TOML: {exc}") from None
        table = data.get("tool", {}).get("conformance", {}) or {}
        check_table_keys(path, table)
    config._conformance_pyproject = table  # type: ignore[attr-defined]
    return table


def check_table_keys(path, table: dict) -> None:
    """Refuse a ``[tool.conformance]`` table (of the file ``path``) with keys that are no option's.

    Raises:
        OptionError: one line naming the unknown keys and every accepted one.
    """
    unknown = set(table) - {o.key for o in OPTIONS}
    if unknown:
        raise OptionError(
            f"{path}: unknown key(s) in [tool.conformance]: {', '.join(sorted(unknown))}; "
            f"accepted: {', '.join(o.key for o in OPTIONS)}"
        )


def get_option(config: pytest.Config, dest: str):
    """The resolved, parsed value of option ``dest``.

    Raises:
        OptionError: the value does not parse; the message names the flag, env var or pyproject key.
    """
    return resolve_option(config, dest)[0]


def resolve_option(config: pytest.Config, dest: str) -> tuple[Any, str]:
    """``(value, where)``: the parsed value of option ``dest`` and where it came from (the flag, ``environment
    variable NAME``, ``[tool.conformance] key`` or ``default``). Also usable before pytest parsed the command
    line (``pytest_load_initial_conftests``): the flag is then read from pytest's early parse.

    Raises:
        OptionError: the value does not parse; the message names the flag, env var or pyproject key.
    """
    o = BY_DEST[dest]
    value = config.getoption(o.argdest, default=None)
    if value is None:  # before the full parse, config.option is empty; pytest's early parse has the flag
        value = getattr(getattr(config, "known_args_namespace", None), o.argdest, None)
    where = o.flag
    if value is None and os.environ.get(o.env) not in (None, ""):
        value, where = os.environ[o.env], f"environment variable {o.env}"
    if value is None:
        table = _pyproject_table(config)
        if o.key in table:
            value, where = table[o.key], f"[tool.conformance] {o.key}"
            if isinstance(value, (int, float, bool)) and not isinstance(value, str):
                value = value if o.is_flag else str(value)
    if value is None:
        value, where = o.default, "default"
        if value is None:
            return None, where
    if o.parse is None:
        return value, where
    try:
        return o.parse(value), where
    except OptionError as exc:
        raise OptionError(f"{where}: {exc}") from None


def selected_dtypes(config: pytest.Config) -> tuple[str, ...]:
    """The dtype names chosen with ``--conformance-dtypes`` (see :data:`DEFAULT_DTYPES`)."""
    return get_option(config, "dtypes")


def options_table() -> str:
    """Markdown table of every option (flag, env var, pyproject key, default, help), for the README."""
    rows = ["| flag | env var | `[tool.conformance]` key | default | what it does |", "| --- | --- | --- | --- | --- |"]
    for o in OPTIONS:
        default = "—" if o.default in (None, False) else f"`{o.default}`"
        rows.append(f"| `{o.flag}` | `{o.env}` | `{o.key}` | {default} | {o.help} |")
    return "\n".join(rows)


if (
    __name__ == "__main__"
):  # python -m neuron_conformance.conformance.pytest_plugin.options prints the README's options table
    print(options_table())
