"""When the compile suite runs, with which ``torch.compile`` backend, and whether that backend can run here.

* **Opt-in** (:func:`suite_requested`): compiling every OpInfo sample costs about 3 s per (op, dtype) test
  on the emulator, tens of times what ``compare_cpu`` spends (docs/opsuites.md, "Compile suite", measured
  by ``benchmarks/compile_suite.py``): about an hour on 2 cores for float32, bfloat16 and float16, three
  times the main job's 20-minute budget. A run that collects ``opsuites/test_compile.py``
  with the other suites (``pytest opsuites``) deselects its tests unless ``--conformance-compile-suite`` is
  given; naming the module (``pytest opsuites/test_compile.py``, a node id of it, or ``--pyargs
  neuron_conformance.opsuites.test_compile``) runs it without the flag.
* **The backend** (:func:`backend_for`): ``--conformance-compile-backend``, else the one registered under
  the device type's name (the emulator's ``neuron``), else ``inductor``
  (:func:`neuron_conformance.opsuites.custom_op_checks.compile_backend_for`, as the custom-op suite).
* **The toolchain** (:func:`toolchain_problem`): inductor on the CPU compiles generated C++ with the
  compiler ``torch._inductor.config.cpp.cxx`` names (``$CXX``, else ``g++``;
  ``torch._inductor.cpp_builder.get_cpp_compiler``). Without one, every test is skipped with one reason,
  so pytest's summary shows one line (``SKIPPED [N] ...``) instead of N compile errors.
"""

from __future__ import annotations

import functools
from pathlib import Path

from neuron_conformance.conformance.pytest_plugin import options as opts
from neuron_conformance.opsuites.custom_op_checks import compile_backend_for

MODULE = Path(__file__).resolve().parents[1] / "test_compile.py"
"""The compile suite's module."""
PYARGS_NAME = "neuron_conformance.opsuites.test_compile"
"""Its name under ``--pyargs``."""


def _names_module(arg: str, invocation_dir: Path) -> bool:
    """True when command-line argument ``arg`` (a path or node id, or a ``--pyargs`` module name) names the
    compile suite's module or a test of it."""
    target = str(arg).split("::", 1)[0]
    if target == PYARGS_NAME:
        return True
    path = Path(target)
    path = path if path.is_absolute() else invocation_dir / path
    try:
        return path.resolve() == MODULE
    except OSError:
        return False


def suite_requested(config) -> bool:
    """True when the compile suite runs in this session: ``--conformance-compile-suite``, or the command line
    names its module (module docstring).

    Raises:
        neuron_conformance.conformance.pytest_plugin.options.OptionError: a bad ``CONFORMANCE_COMPILE_SUITE`` value.
    """
    if opts.get_option(config, "compile_suite"):
        return True
    # an xdist worker is configured from the controller's resolved ``config.args``, relative to the rootdir
    args = [str(a) for a in (*config.invocation_params.args, *config.args) if not str(a).startswith("-")]
    dirs = {Path(str(config.invocation_params.dir)), Path(str(config.rootpath))}
    return any(_names_module(a, d) for a in args for d in dirs)


def deselect_unrequested(config, items: list) -> list:
    """Remove the compile suite's tests from ``items`` (in place) unless :func:`suite_requested`; the
    removed items, reported to pytest as deselected (``N deselected`` in its summary)."""
    if suite_requested(config):
        return []
    dropped = [item for item in items if Path(str(item.path)).resolve() == MODULE]
    if dropped:
        keep = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in keep]
        config.hook.pytest_deselected(items=dropped)
    return dropped


def backend_for(device, option: str | None) -> str:
    """The backend the suite compiles with (module docstring)."""
    return compile_backend_for(device, option)


@functools.lru_cache(maxsize=None)
def _cxx_problem() -> str | None:
    try:
        from torch._inductor import cpp_builder  # deferred: inductor's import costs seconds; only inductor needs it

        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # noqa: BLE001 - InvalidCxxCompiler, or anything else that stops the search
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def toolchain_problem(backend: str, device) -> str | None:
    """One line saying why ``backend`` cannot compile for ``device`` on this machine, or None.

    Only inductor on the CPU is checked: it needs a C++ compiler (module docstring).
    """
    if backend != "inductor" or device.type != "cpu":
        return None
    problem = _cxx_problem()
    if problem is None:
        return None
    return (
        f"the compile suite cannot run: inductor on cpu needs a C++ compiler (torch._inductor.config.cpp.cxx: "
        f"$CXX, else g++) and none was found ({problem}); install g++, or pass "
        f"--conformance-compile-backend=aot_eager"
    )


__all__ = ["MODULE", "PYARGS_NAME", "backend_for", "deselect_unrequested", "suite_requested", "toolchain_problem"]
