"""The device under test: resolve ``--conformance-device`` / ``--conformance-backend-module`` into a :class:`DeviceProfile`.

The harness treats every backend the same way: the built-in emulated ``neuron`` device, a vendor's
PrivateUse1 plugin (``--conformance-backend-module torch_neuronx``), CUDA, XPU, MPS or plain CPU (a self-check: CPU
against CPU must pass everywhere). Resolution:

1. ``--conformance-backend-module M`` is imported first; importing it must register the device. Without it, a
   backend torch loaded at ``import torch`` through a ``[torch.backends]`` entry point
   (``torch._import_device_backends``, on unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``) that took
   PrivateUse1 is the module (:func:`autoloaded_backend`).
2. The device type is ``--conformance-device``, else the renamed PrivateUse1 backend of ``M``, else
   the current accelerator when it is available (``torch.accelerator.current_accelerator(check_available=True)``:
   a CUDA build of torch on a host without a GPU has none), else :data:`neuron_conformance.conformance.backend.emulated.DEFAULT_DEVICE` (``neuron``),
   unless the running torch is older than that emulated device needs: then ``cpu``, said in the run's
   torch-floor line (:mod:`neuron_conformance.conformance.pytest_plugin.torch_floor`).
3. A device type that an installed distribution declares as an *emulated device* (the entry-point group
   :data:`neuron_conformance.conformance.backend.emulated.GROUP`; this distribution declares ``neuron``) with no backend module and no other
   backend registered under that name: the harness imports that device's backend module and reads its
   declarations like any vendor's. Another PrivateUse1 backend registered already (PyTorch autoloads
   installed backends at ``import torch``) is a :class:`DeviceError` naming it and
   ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``.
4. The device must allocate a tensor; otherwise :class:`DeviceError`.

Everything the harness knows of a backend comes from its module's ``CONFORMANCE_*`` declarations
(docs/architecture.md, "Device under test"): ``CONFORMANCE_EMULATED``, ``CONFORMANCE_MIRRORS_CPU``,
``CONFORMANCE_NUMERIC_MODE`` and ``CONFORMANCE_SET_NUMERIC_MODE``, ``CONFORMANCE_API_SUPPORT``,
``CONFORMANCE_MANIFESTS``, ``CONFORMANCE_DIST_BACKEND``, ``CONFORMANCE_COUNT_OPS``, ``CONFORMANCE_OP_TRACKING``,
``CONFORMANCE_MEMORY_BUDGET``, ``CONFORMANCE_CAPABILITIES``, ``CONFORMANCE_CUSTOM_OPS``, ``CONFORMANCE_MODES``.
No module of the harness imports or names a particular backend. How the backend got registered is
:attr:`DeviceProfile.registered_by`. The device APIs of a backend that does not report its own
(``CONFORMANCE_API_SUPPORT``) are probed later, in a child process
(:mod:`neuron_conformance.conformance.backend.probe`), so that an API that crashes costs a line, not the run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from neuron_conformance.conformance.backend import emulated
from neuron_conformance.conformance.backend.budget import declared_budget
from neuron_conformance.conformance.backend.modes import apply_callables
from neuron_conformance.conformance.backend.transfer import preflight
from neuron_conformance.conformance.pytest_plugin import torch_floor

AUTOLOAD_GROUP = "torch.backends"
"""The entry-point group torch imports at ``import torch`` (torch/__init__.py, ``_import_device_backends``)."""
AUTOLOAD_ENV = "TORCH_DEVICE_BACKEND_AUTOLOAD"
"""``0`` turns torch's backend autoloading off (torch/__init__.py, ``_is_device_backend_autoload_enabled``)."""
NUMERIC_MODE_ENV = "CONFORMANCE_EMULATOR_MODE"
"""The numeric-mode variable (``--conformance-emulator-mode``), exported to a backend module before it is
imported, so that a module which installs an emulated device at import reads the run's mode."""

_harness_installed = False
"""True once :func:`resolve_profile` installed an emulated device in this process on a free PrivateUse1 key."""


class DeviceError(RuntimeError):
    """The device under test cannot be used: unknown type, backend module missing or broken, no device."""


@dataclass
class DeviceProfile:
    """What is under test. See docs/architecture.md for each field.

    Attributes:
        type: device type string (``neuron``, ``cuda``, ``cpu``...).
        backend: module or library providing it.
        backend_version: its version string.
        emulated: the backend module declares an emulated device (``CONFORMANCE_EMULATED``).
        mirrors_cpu: the backend runs CPU kernels, so results must be bitwise equal to CPU.
        dist_backend: ``torch.distributed`` backend name for this device, or None.
        emulator_mode: ``mirror`` or ``device`` for the emulated device, else None.
        api_support: device API name -> ``native`` / ``shim`` / ``missing`` (the backend's own report, ``CONFORMANCE_API_SUPPORT``, or
            the start-up preflight's, :mod:`neuron_conformance.conformance.backend.probe`).
        op_counter: ``"module:attribute"`` of the backend's own aten-overload counter (the backend module's
            ``CONFORMANCE_COUNT_OPS``), or None: aten coverage is then not traced unless
            ``--conformance-aten-coverage mode`` (:func:`neuron_conformance.conformance.results.coverage.choose_method`).
        op_tracking: ``"module:attribute"`` of the backend's op tracking (native versus CPU-fallback ops, the
            backend module's ``CONFORMANCE_OP_TRACKING``, :mod:`neuron_conformance.conformance.backend.fallbacks`), or None: fallback
            is not observable.
        memory_budget: bytes of device memory the backend lets the stress suite hold at once (the backend
            module's ``CONFORMANCE_MEMORY_BUDGET``), or None (:mod:`neuron_conformance.conformance.backend.budget`).
        transfer: how sample inputs move to the device (:func:`neuron_conformance.conformance.backend.transfer.preflight`): ``set_``
            (storage, offset and strides kept) or ``empty_strided+copy_`` (the repro scripts' path; weaker
            layout checks, :data:`neuron_conformance.conformance.backend.transfer.FALLBACK_WEAKENS`).
        registered_by: how the backend got registered: ``harness`` (the harness imported an emulated device in
            this process), ``backend-module`` (``--conformance-backend-module``), ``autoload:NAME`` (torch's
            ``[torch.backends]`` entry point NAME at ``import torch``), ``process`` (registered before the
            harness started by other code in the process) or ``torch`` (a built-in device type).
    """

    type: str
    backend: str
    backend_version: str
    emulated: bool = False
    mirrors_cpu: bool = False
    dist_backend: str | None = None
    emulator_mode: str | None = None
    api_support: dict = field(default_factory=dict)
    op_counter: str | None = None
    op_tracking: str | None = None
    memory_budget: int | None = None
    transfer: str = "set_"
    registered_by: str = "torch"

    @property
    def device(self) -> torch.device:
        """``torch.device`` of the device type (index left to the backend's current device)."""
        return torch.device(self.type)

    def to_dict(self) -> dict:
        """JSON-serialisable form, as written to ``run.json``."""
        return asdict(self)


def _import_backend(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise DeviceError(f"--conformance-backend-module {name!r} cannot be imported: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a broken plugin must become one clear error
        raise DeviceError(
            f"--conformance-backend-module {name!r} failed while importing: {type(exc).__name__}: {exc}"
        ) from None


def _privateuse1_name() -> str:
    return torch._C._get_privateuse1_backend_name()


def _version_of(module: types.ModuleType) -> str:
    v = getattr(module, "__version__", None)
    if v:
        return str(v)
    root = module.__name__.split(".")[0]
    try:
        return importlib.metadata.version(root)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def default_dist_backend(device_type: str, module: types.ModuleType | None = None) -> str | None:
    """Collective backend for ``device_type``: torch's default for the device, else the module's
    ``CONFORMANCE_DIST_BACKEND``, else None."""
    try:
        import torch.distributed as dist

        if dist.is_available():
            return dist.get_default_backend_for_device(device_type)
    except (ValueError, RuntimeError, AttributeError):
        pass
    return getattr(module, "CONFORMANCE_DIST_BACKEND", None) if module is not None else None


def resolve_profile(
    device: str | None = None, backend_module: str | None = None, emulator_mode: str = "mirror"
) -> DeviceProfile:
    """Load the backend and describe the device under test.

    Args:
        device: device type string, or None for the default (see module docstring).
        backend_module: importable module that registers the backend, or None.
        emulator_mode: ``mirror`` or ``device``, used when the emulated device is chosen.

    Raises:
        DeviceError: unknown device type, backend module that fails to import, device that cannot
            allocate a tensor, or a device index other than the backend's (``neuron:1``).
    """
    global _harness_installed
    if backend_module:
        # a backend module that installs an emulated device at import (tests/faults/fault_backend.py) reads
        # the mode from $CONFORMANCE_EMULATOR_MODE: give it the mode this run resolved (flag > env > config)
        os.environ[NUMERIC_MODE_ENV] = emulator_mode
    module = _import_backend(backend_module) if backend_module else None
    if module is not None:
        try:
            apply_callables(module)  # a differential run's callable execution-mode settings
        except ValueError as exc:
            raise DeviceError(str(exc)) from None
    registered_by = "backend-module" if module is not None else "torch"
    autoloaded = None if module is not None or _harness_installed else autoloaded_backend()
    if autoloaded is not None and device in (None, _privateuse1_name()):
        registered_by, module = f"autoload:{autoloaded[0]}", autoloaded[1]
    if device is None:
        pu1 = _privateuse1_name()
        if module is not None and pu1 != "privateuseone":
            device = pu1
        else:
            acc = available_accelerator()
            device = acc.type if acc is not None and acc.type != "privateuseone" else emulated.DEFAULT_DEVICE
            if device == emulated.DEFAULT_DEVICE and (unmet := torch_floor.emulated_unmet(device)):
                torch_floor.note(f"the emulated {device} device, so this run tests cpu ({unmet})")
                device = "cpu"
    if ":" in device:
        raise DeviceError(f"--conformance-device {device!r}: give a device type without an index (e.g. 'neuron')")

    emulated_module = emulated.backend_module(device) if module is None else None
    if emulated_module is not None:
        if _privateuse1_name() == "privateuseone" and (unmet := torch_floor.emulated_unmet(device)):
            raise DeviceError(f"--conformance-device {device}: {unmet}")
        if _privateuse1_name() == "privateuseone" or _registered_by_package(device, emulated_module):
            _harness_installed = _harness_installed or _privateuse1_name() == "privateuseone"
            module = _import_emulated(emulated_module)
            _apply_numeric_mode(module, emulator_mode, always=True)
            registered_by = "harness"
        elif _privateuse1_name() != device:
            raise DeviceError(
                f"--conformance-device {device}: PrivateUse1 is already registered as {_privateuse1_name()!r} (a "
                f"backend PyTorch autoloaded at import); set {AUTOLOAD_ENV}=0 to test the emulated "
                f"{device} device, or use --conformance-device {_privateuse1_name()}"
            )
        else:  # a real backend of that name (torch_neuronx) registered itself before the harness started
            module, registered_by = torch.get_device_module(device), "process"
    elif registered_by == "backend-module":
        source = _numeric_mode_source(module)
        _apply_numeric_mode(
            source, emulator_mode, always=False, backend_module=backend_module, may_set=source is module
        )

    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        if registered_by == "backend-module":
            raise DeviceError(_unregistered(backend_module, module, device)) from None
        raise DeviceError(
            f"--conformance-device {device!r} is not a device type torch knows: {exc}. Load its "
            f"backend with --conformance-backend-module, or use one of: cpu, cuda, xpu, mps, neuron "
            f"(emulated)"
        ) from None
    try:
        torch.empty(1, device=dev)
    except Exception as exc:  # noqa: BLE001
        raise DeviceError(
            f"--conformance-device {device!r} cannot allocate a tensor: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}; choose another device with --conformance-device "
            f"(e.g. --conformance-device {emulated.DEFAULT_DEVICE}, the emulated device)"
        ) from None

    profile = _describe(device, module)
    profile.transfer = preflight(device)
    profile.registered_by = registered_by
    return profile


_REGISTRATION_NAMES = ("register", "init", "setup", "install", "enable", "load", "activate")
"""How the registration call of a backend that registers nothing at import usually starts."""


def _unregistered(backend_module: str | None, module: types.ModuleType, device: str) -> str:
    """Why ``--conformance-backend-module`` gave no device ``device``: the module registered none at import (it
    needs a registration call, named when the module has a likely one), or it registered another name."""
    registered = _privateuse1_name()
    if registered != "privateuseone":
        return (
            f"--conformance-backend-module {backend_module!r} registered the device {registered!r}, not "
            f"{device!r}: use --conformance-device {registered}"
        )
    calls = sorted(
        name
        for name, value in vars(module).items()
        if callable(value) and not isinstance(value, type) and name.lower().startswith(_REGISTRATION_NAMES)
    )
    hint = f" ({', '.join(f'{backend_module}.{c}()' for c in calls[:3])}?)" if calls else ""
    return (
        f"--conformance-backend-module {backend_module!r} was imported but registered no device (PrivateUse1 is "
        f"still unnamed, so {device!r} is unknown to torch): a backend that needs a registration call{hint} "
        f"must be loaded through a module of yours that imports it and makes the call; name that module "
        f"with --conformance-backend-module"
    )


def available_accelerator() -> torch.device | None:
    """The current accelerator if it is available, else None.

    ``torch.accelerator.current_accelerator()`` answers the build's accelerator (``cuda`` for PyPI's default
    Linux wheel) even on a host without the device; ``check_available=True`` (torch >= 2.8) asks whether it
    is usable. Older torch: the same question through ``torch.accelerator.is_available()``.
    """
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:
        return None
    try:
        return accelerator.current_accelerator(check_available=True)
    except TypeError:  # torch < 2.8: no check_available argument
        current = accelerator.current_accelerator()
        return current if current is not None and accelerator.is_available() else None


def autoloaded_backend() -> tuple[str, types.ModuleType] | None:
    """The backend torch autoloaded at ``import torch`` that took PrivateUse1, as (entry point name,
    module), or None: autoloading is off (``TORCH_DEVICE_BACKEND_AUTOLOAD`` is not ``1``), PrivateUse1 is
    free, or no ``[torch.backends]`` entry point's module is loaded.

    The fact used: torch imports every entry point of the group at ``import torch`` when autoloading is on
    (torch/__init__.py), so a loaded entry-point module is one torch loaded. With several, the first in
    ``importlib.metadata`` order is taken.
    """
    if os.environ.get(AUTOLOAD_ENV, "1") != "1" or _privateuse1_name() == "privateuseone":
        return None
    for entry in importlib.metadata.entry_points(group=AUTOLOAD_GROUP):
        if emulated.installs_emulated_device(entry.module):
            continue  # an emulated device's own autoload: handled as that device, not as a third-party backend
        module = sys.modules.get(entry.module)
        if module is not None:
            return entry.name, module
    return None


def _describe(device: str, module: types.ModuleType | None) -> DeviceProfile:
    """The :class:`DeviceProfile` of a device that allocates (see :func:`resolve_profile`), from the
    backend module's declarations (docs/architecture.md, "Device under test")."""
    if module is not None:
        is_emulated = bool(getattr(module, "CONFORMANCE_EMULATED", False))
        mode_of = getattr(module, "CONFORMANCE_NUMERIC_MODE", None)
        api_support = getattr(module, "CONFORMANCE_API_SUPPORT", None)
        return DeviceProfile(
            type=device,
            backend=module.__name__,
            backend_version=_version_of(module),
            emulated=is_emulated,
            mirrors_cpu=bool(_declared_value(module, "CONFORMANCE_MIRRORS_CPU", False)),
            dist_backend=default_dist_backend(device, module),
            emulator_mode=mode_of() if is_emulated and callable(mode_of) else None,
            api_support=dict(api_support()) if callable(api_support) else {},
            op_counter=f"{module.__name__}:CONFORMANCE_COUNT_OPS"
            if callable(getattr(module, "CONFORMANCE_COUNT_OPS", None))
            else None,
            op_tracking=f"{module.__name__}:CONFORMANCE_OP_TRACKING"
            if getattr(module, "CONFORMANCE_OP_TRACKING", None) is not None
            else None,
            memory_budget=declared_budget(module),
        )
    if device == "cpu":
        return DeviceProfile(
            type="cpu", backend="torch", backend_version=torch.__version__, mirrors_cpu=True, dist_backend="gloo"
        )
    version = torch.__version__
    if device == "cuda" and torch.version.cuda:
        version += f" (CUDA {torch.version.cuda})"
    return DeviceProfile(
        type=device, backend="torch", backend_version=version, dist_backend=default_dist_backend(device)
    )


def check_compile_backend(name: str | None) -> str | None:
    """``name`` when it is a ``torch.compile`` backend (``torch._dynamo.list_backends``), None for None.

    Raises:
        DeviceError: an unknown name, listing the registered backends.
    """
    if not name:
        return None
    # deferred: importing torch._dynamo costs about a second; only when --conformance-compile-backend is given
    from torch._dynamo import list_backends

    known = list_backends(exclude_tags=())
    if name not in known:
        raise DeviceError(
            f"--conformance-compile-backend {name!r} is not a registered torch.compile backend; "
            f"registered: {', '.join(sorted(known))}"
        )
    return name


def harness_version() -> str:
    try:
        return importlib.metadata.version("neuron-conformance")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _registered_by_package(device: str, module_name: str) -> bool:
    """True when the device module torch holds for ``device`` comes from ``module_name``'s package: the
    emulated device was installed earlier in this process (e.g. at ``import torch``). Told by where the
    device module's functions are defined, whatever name the module object carries."""
    try:
        registered = torch.get_device_module(device)
    except (RuntimeError, AttributeError):
        return False
    package = emulated.package_of(module_name)
    origins = {
        getattr(getattr(registered, name, None), "__module__", "") or ""
        for name in ("device_count", "is_available", "synchronize", "current_device")
    }
    return bool(package) and any(origin.startswith(f"{package}.") for origin in origins)


def _import_emulated(name: str) -> types.ModuleType:
    """Import an emulated device's backend module; a setting it rejects (ValueError) is a DeviceError with
    its message."""
    try:
        return importlib.import_module(name)
    except ValueError as exc:
        raise DeviceError(str(exc)) from None
    except ImportError as exc:
        raise DeviceError(f"the emulated device's backend module {name!r} cannot be imported: {exc}") from None


def _declared_value(module: types.ModuleType, name: str, default):
    """A backend module's declaration ``name``: its value, or what it returns when it is callable."""
    value = getattr(module, name, default)
    return value() if callable(value) else value


def _numeric_mode_source(module: types.ModuleType) -> types.ModuleType:
    """Where a backend module's numeric mode is declared: the module itself, or, for a module built on an
    emulated device that declares none (it installed that device), the emulated device's backend module."""
    if callable(getattr(module, "CONFORMANCE_NUMERIC_MODE", None)):
        return module
    device = _privateuse1_name()
    base = emulated.backend_module(device)
    if base is None or not _registered_by_package(device, base):
        return module
    try:
        return importlib.import_module(base)  # installed already: its import adds nothing
    except Exception:  # noqa: BLE001 - no numeric mode to check is the same as none declared
        return module


def _apply_numeric_mode(
    module: types.ModuleType, mode: str, *, always: bool, backend_module: str | None = None, may_set: bool = True
) -> None:
    """Bring a backend module that declares numeric modes (``CONFORMANCE_NUMERIC_MODE``, the current mode,
    and ``CONFORMANCE_SET_NUMERIC_MODE``) into ``mode``: set it (``always``, or when it differs); a module
    in another mode that cannot set it (no setter, or ``may_set`` false: the mode is another module's) is a
    :class:`DeviceError`.

    Raises:
        DeviceError: the module rejects the mode, or runs in another mode and declares no setter.
    """
    current = getattr(module, "CONFORMANCE_NUMERIC_MODE", None)
    if not callable(current):
        return
    setter = getattr(module, "CONFORMANCE_SET_NUMERIC_MODE", None)
    if callable(setter) and may_set and (always or current() != mode):
        try:
            setter(mode)
        except ValueError as exc:  # e.g. a bad $CONFORMANCE_EMULATOR_FALLBACK entry
            raise DeviceError(str(exc)) from None
    elif current() != mode:
        raise DeviceError(
            f"--conformance-backend-module {backend_module!r} installed the emulated device in {current()} mode, "
            f"but this run asks for --conformance-emulator-mode {mode} ({NUMERIC_MODE_ENV}={mode}); the "
            f"module must install its emulated device with the mode ${NUMERIC_MODE_ENV} names"
        )


def backend_manifests(profile: DeviceProfile) -> list[Path]:
    """The expected-failure manifests the backend module ships for its mode (``CONFORMANCE_MANIFESTS``, a
    callable ``mode -> [path]``), the existing files among them; ``[]`` when it declares none."""
    module = sys.modules.get(profile.backend)
    declared = getattr(module, "CONFORMANCE_MANIFESTS", None) if module is not None else None
    if not callable(declared):
        return []
    return [Path(p) for p in declared(profile.emulator_mode) if Path(p).is_file()]
