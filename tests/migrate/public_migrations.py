"""Before/after corpus for the substitutions of public device-generic migrations.

Each :class:`Case` is one substitution that a public migration made by hand, in a snippet written for
this corpus (the code is ours; the substitution facts are from the cited source):

* PyTorch's 2026 test-suite migration to device-generic APIs (RFC pytorch/pytorch#174469, tracking
  issue pytorch/pytorch#185590). Neither thread's own text is in the stored corpus the search tools
  read; the substitutions are taken from the pull requests that cite them (#189740, #189751, #189753,
  #190911, #190913, #190914, #191474, #191879, #184192, #190521, #192880, #193379, #196535, #196568)
  and from the refactoring guide those PRs follow (the ``test-refactor`` skill of the PyTorch
  repository, which links both issues: "x.cuda() -> x.to(self.device_type)", "nccl is CUDA").
* transformers' device-agnostic testing guide (``docs/source/en/testing.md``, "Testing with a specific
  PyTorch backend or device"): ``torch.cuda.manual_seed``, ``torch.cuda.empty_cache`` and
  ``torch.cuda.device_count`` dispatched per device (``MANUAL_SEED_FN``, ``EMPTY_CACHE_FN``,
  ``DEVICE_COUNT_FN``), and ``TRANSFORMERS_TEST_DEVICE`` in place of ``CUDA_VISIBLE_DEVICES``.

:func:`outcome` runs neuron-migrate on a case: **fixed** when ``--fix --unsafe-fixes`` removes every
``cuda`` marker of the case and writes every ``generic`` marker; **reported** when a finding starts on
the line of the idiom (marked ``# idiom``) but the fix does not happen; **missed** otherwise.
``python -m tests.migrate.public_migrations`` prints the table that ``docs/migrate.md`` carries.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Tuple

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

FIXED, REPORTED, MISSED = "fixed", "reported", "missed"


@dataclasses.dataclass(frozen=True)
class Case:
    """One public substitution.

    Attributes:
        key: short id.
        source: where the substitution was made (PR number, or the transformers guide).
        substitution: the substitution, as the source describes it.
        before: our snippet with the CUDA idiom; its line(s) with the idiom end in ``# idiom``.
        cuda: substrings that must be gone after the fix.
        generic: substrings that must be present after the fix.
        expected: the outcome recorded in ``docs/migrate.md`` (the test compares it).
        note: why a case is reported or missed.
    """

    key: str
    source: str
    substitution: str
    before: str
    cuda: Tuple[str, ...]
    generic: Tuple[str, ...]
    expected: str
    note: str = ""

    @property
    def group(self) -> str:
        """``transformers`` for the testing guide's substitutions, else ``PyTorch``."""
        return "transformers" if self.source == TF else "PyTorch"


PT = "pytorch#"
TF = "transformers testing guide"

CASES = (
    Case(
        "memory-stats",
        PT + "189751",
        "`torch.cuda.memory_stats()` -> `torch.accelerator.memory_stats()`",
        "import torch\n\ndef peak_bytes():\n    stats = torch.cuda.memory_stats()  # idiom\n"
        "    return stats.get('allocated_bytes.all.peak', 0)\n",
        ("torch.cuda.memory_stats",),
        ("torch.accelerator.memory_stats()",),
        FIXED,
    ),
    Case(
        "default-device",
        PT + "189751",
        '`torch.set_default_device("cuda")` -> the accelerator\'s type',
        "import torch\n\nclass T:\n    def setUp(self):\n        torch.set_default_device('cuda')  # idiom\n",
        ("'cuda'",),
        ("torch.set_default_device(DEVICE_TYPE)",),
        FIXED,
    ),
    Case(
        "factory-device",
        PT + "189751, #189753, #190913",
        '`device="cuda"` in a factory -> the device type',
        'import torch\n\ndef sample():\n    return torch.randn(4, 8, device="cuda")  # idiom\n',
        ('"cuda"',),
        ("device=DEVICE_TYPE",),
        FIXED,
    ),
    Case(
        "availability-guard",
        PT + "190913, #190914",
        "`torch.cuda.is_available()` guard -> `torch.accelerator.is_available()`",
        "import torch\n\ndef inputs(xs):\n    for x in xs:\n        if not torch.cuda.is_available():  # idiom\n"
        '            continue\n        yield x.to("cuda")\n',
        ("torch.cuda.is_available", '"cuda"'),
        ("torch.accelerator.is_available()",),
        FIXED,
    ),
    Case(
        "set-device",
        PT + "189740",
        "`torch.cuda.set_device(self.rank)` -> `torch.accelerator.set_device_index`",
        "import torch\n\nclass Worker:\n    rank = 0\n    def start(self):\n"
        "        torch.cuda.set_device(self.rank)  # idiom\n",
        ("torch.cuda.set_device",),
        ("torch.accelerator.set_device_index(self.rank)",),
        FIXED,
    ),
    Case(
        "current-device",
        PT + "189740",
        "`torch.cuda.current_device()` -> `torch.accelerator.current_device_index()`",
        "import torch\n\ndef where():\n    return torch.cuda.current_device()  # idiom\n",
        ("torch.cuda.current_device",),
        ("torch.accelerator.current_device_index()",),
        FIXED,
    ),
    Case(
        "class-device",
        PT + "189753",
        '`cls.device = "cuda"` -> the module\'s device type',
        'import torch\n\nclass Suite:\n    @classmethod\n    def setUpClass(cls):\n        cls.device = "cuda"  # idiom\n',
        ('"cuda"',),
        ("cls.device = DEVICE_TYPE",),
        FIXED,
    ),
    Case(
        "selection-ternary",
        PT + "190911",
        '`"cuda:0" if torch.cuda.is_available() else "cpu"` -> the current accelerator or the CPU',
        'import torch\n\ndef pick():\n    return torch.zeros(2, device="cuda:0" if torch.cuda.is_available() else "cpu")  # idiom\n',
        ("cuda:0", "torch.cuda"),
        ("torch.accelerator",),
        FIXED,
    ),
    Case(
        "indexed-device",
        PT + "191474",
        '`torch.device(f"cuda:{args.gpu}")` -> `torch.device(<type>, args.gpu)`',
        'import torch\n\ndef device_for(args):\n    return torch.device(f"cuda:{args.gpu}")  # idiom\n',
        ("cuda:",),
        ("DEVICE_TYPE",),
        FIXED,
    ),
    Case(
        "sync-reference",
        PT + "191474",
        "`do_sync = torch.cuda.synchronize` -> `torch.accelerator.synchronize`",
        "import torch\n\ndef syncer():\n    do_sync = torch.cuda.synchronize  # idiom\n    return do_sync\n",
        ("torch.cuda.synchronize",),
        ("torch.accelerator.synchronize",),
        FIXED,
    ),
    Case(
        "synchronize",
        PT + "196535",
        "`torch.cuda.synchronize()` -> `torch.accelerator.synchronize()`",
        "import torch\n\ndef timed(fn):\n    out = fn()\n    torch.cuda.synchronize()  # idiom\n    return out\n",
        ("torch.cuda.synchronize",),
        ("torch.accelerator.synchronize()",),
        FIXED,
    ),
    Case(
        "guarded-sync",
        PT + "196568",
        "`torch.cuda.is_available()` + `torch.cuda.synchronize(device)` -> the `torch.accelerator` pair",
        "import torch\n\ndef wait_for(device):\n    if torch.cuda.is_available():  # idiom\n"
        "        torch.cuda.synchronize(device)  # idiom\n",
        ("torch.cuda",),
        ("torch.accelerator.is_available()", "torch.accelerator.synchronize(device)"),
        FIXED,
    ),
    Case(
        "imported-sync",
        PT + "196535",
        "`from torch.cuda import synchronize` removed with its calls",
        "import torch\nfrom torch.cuda import synchronize  # idiom\n\ndef flush():\n    synchronize()  # idiom\n",
        ("torch.cuda",),
        ("torch.accelerator.synchronize()",),
        FIXED,
    ),
    Case(
        "is-cuda-gate",
        PT + "196535",
        '`arg.is_cuda` gate -> `arg.device.type != "cpu"`',
        "import torch\n\ndef any_on_device(args):\n    return any(a.is_cuda for a in args)  # idiom\n",
        ("is_cuda",),
        ('device.type != "cpu"',),
        REPORTED,
        "NM112: 'on an accelerator' or 'on NVIDIA' needs a human",
    ),
    Case(
        "cuda-method",
        PT + "190521, #192880",
        "`x.cuda()` -> `x.to(<device>)`",
        "import torch\n\ndef prepare(model, batch):\n    model = model.cuda()  # idiom\n"
        "    return model(batch.cuda())  # idiom\n",
        (".cuda()",),
        (".to(DEVICE_TYPE)",),
        FIXED,
    ),
    Case(
        "device-ctor",
        "PyTorch test-refactor guide",
        '`torch.device("cuda")` -> `torch.device(<type>)`',
        'import torch\n\nDEV = torch.device("cuda")  # idiom\n',
        ('"cuda"',),
        ("torch.device(DEVICE_TYPE)",),
        FIXED,
    ),
    Case(
        "nccl-backend",
        "PyTorch test-refactor guide",
        'hard-coded `"nccl"` -> `dist.get_default_backend_for_device(<type>)`',
        "import torch.distributed as dist\n\ndef init(rank, world):\n"
        '    dist.init_process_group("nccl", rank=rank, world_size=world)  # idiom\n',
        ('"nccl"',),
        ("get_default_backend_for_device",),
        FIXED,
    ),
    Case(
        "vendor-chain",
        PT + "184192",
        '`if TEST_CUDA: device = "cuda" elif TEST_PRIVATEUSE1: ...` -> `torch.accelerator.current_accelerator()`',
        "import torch\nTEST_CUDA = TEST_PRIVATEUSE1 = False\n\ndef pick():\n    if TEST_CUDA:\n"
        '        device = "cuda"  # idiom\n    elif TEST_PRIVATEUSE1:\n'
        '        device = torch._C._get_privateuse1_backend_name()\n    else:\n        device = "cpu"\n'
        "    return device\n",
        ('"cuda"',),
        ("DEVICE_TYPE",),
        FIXED,
    ),
    Case(
        "device-type-assert",
        PT + "191879",
        '`.device.type` assertions against `"cuda"` -> the device type',
        "import unittest\nimport torch\n\nclass T(unittest.TestCase):\n    def test_meta(self):\n"
        '        t = torch.empty(2)\n        self.assertEqual(t.device.type, "cuda")  # idiom\n',
        ('"cuda"',),
        ("DEVICE_TYPE",),
        REPORTED,
        "NM111: whether the test means CUDA or the device under test needs a human",
    ),
    Case(
        "skip-flag",
        PT + "191879",
        "`@skipIf(not RUN_CUDA, ...)` -> `TEST_ACCELERATOR`",
        "import unittest\nRUN_CUDA = False\n\nclass T(unittest.TestCase):\n"
        '    @unittest.skipIf(not RUN_CUDA, "requires cuda")  # idiom\n    def test_x(self):\n        pass\n',
        ("RUN_CUDA",),
        ("TEST_ACCELERATOR",),
        MISSED,
        "a test-suite flag of the user's own (no torch API names it)",
    ),
    Case(
        "triton-flag",
        PT + "189751, #190918",
        "`HAS_CUDA_AND_TRITON` -> `HAS_GPU`",
        "from torch.testing._internal.inductor_utils import HAS_CUDA_AND_TRITON  # idiom\n\n"
        "if __name__ == '__main__' and HAS_CUDA_AND_TRITON:  # idiom\n    pass\n",
        ("HAS_CUDA_AND_TRITON",),
        ("HAS_GPU",),
        MISSED,
        "a flag of PyTorch's internal test utilities, not a torch API",
    ),
    Case(
        "private-sleep",
        PT + "193379",
        "`torch.cuda._sleep(n)` -> the current accelerator module's `_sleep`",
        "import torch\n\ndef spin(cycles):\n    torch.cuda._sleep(cycles)  # idiom\n",
        ("torch.cuda._sleep",),
        ("get_device_module",),
        REPORTED,
        "private API; only CUDA and XPU have it",
    ),
    Case(
        "manual-seed",
        TF,
        "`torch.cuda.manual_seed(s)` -> the device's seed setter (`MANUAL_SEED_FN`)",
        "import torch\n\ndef seed_all(s):\n    torch.manual_seed(s)\n    torch.cuda.manual_seed(s)  # idiom\n",
        ("torch.cuda.manual_seed",),
        (),
        FIXED,
        "NM401: `torch.manual_seed` already seeds every device; the redundant call is removed",
    ),
    Case(
        "empty-cache",
        TF,
        "`torch.cuda.empty_cache()` -> the device's `EMPTY_CACHE_FN`",
        "import gc\nimport torch\n\ndef tearDown():\n    gc.collect()\n    torch.cuda.empty_cache()  # idiom\n",
        ("torch.cuda.empty_cache",),
        ("torch.accelerator.empty_cache()",),
        FIXED,
    ),
    Case(
        "device-count",
        TF,
        "`torch.cuda.device_count()` -> the device's `DEVICE_COUNT_FN`",
        "import torch\n\ndef n_devices():\n    return torch.cuda.device_count()  # idiom\n",
        ("torch.cuda.device_count",),
        ("torch.accelerator.device_count()",),
        FIXED,
    ),
    Case(
        "visible-devices",
        TF,
        "`CUDA_VISIBLE_DEVICES` -> `TRANSFORMERS_TEST_DEVICE`",
        'import os\n\ndef cpu_only():\n    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # idiom\n',
        ("CUDA_VISIBLE_DEVICES",),
        ("TRANSFORMERS_TEST_DEVICE",),
        REPORTED,
        "NM807: which variable hides devices is backend-specific",
    ),
)

ALL = selection(None, None)


def outcome(case: Case) -> Tuple[str, str]:
    """``(outcome, fixed text)`` of neuron-migrate on ``case.before`` (see the module docstring).

    Raises:
        AssertionError: the tool failed on the snippet (a tool error is never an outcome).
    """
    fixed = check_source(case.before, Settings(ALL, fix=True, unsafe_fixes=True))
    assert fixed.error is None, f"{case.key}: {fixed.error}"
    after = fixed.new_source or case.before
    if not any(c in after for c in case.cuda) and all(g in after for g in case.generic):
        return FIXED, after
    lines = {i for i, line in enumerate(case.before.splitlines(), 1) if line.rstrip().endswith("# idiom")}
    found = check_source(case.before, Settings(ALL)).violations
    if any(v.line in lines for v in found):
        return REPORTED, after
    return MISSED, after


def table() -> str:
    """The Markdown table of every case and its measured outcome, with the totals per source."""
    rows = ["| source | substitution | neuron-migrate | note |", "| --- | --- | --- | --- |"]
    totals: dict = {}
    for case in CASES:
        got, _ = outcome(case)
        totals.setdefault(case.group, {FIXED: 0, REPORTED: 0, MISSED: 0})[got] += 1
        rows.append(f"| {case.source} | {case.substitution} | {got} | {case.note} |")
    rows.append("")
    for group, t in totals.items():
        rows.append(
            f"{group}: {sum(t.values())} substitutions, {t[FIXED]} fixed, {t[REPORTED]} reported, {t[MISSED]} missed."
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
