"""Test backend module (``--conformance-backend-module tests.survival.faulty_backend``): the emulated device with
crashing, hanging and poisoning kernels injected (neuron_conformance.emulator.faults).

* ``aten::relu`` calls ``os.abort()`` (SIGABRT); ``aten::exp`` reads address 0 (SIGSEGV);
* ``aten::sin`` sleeps forever;
* ``aten::cos`` raises and "loses the device": from then on ``aten::add.Tensor`` and ``aten::mul.Tensor``
  raise in this process, so the canary (``ones(2).add(1)``) fails.

``$FAULTY_BACKEND_OFF`` set to ``1`` installs the emulator without faults (the baseline run).
"""

import os

import neuron_conformance.emulator as emu
from neuron_conformance.emulator import faults

emu.install()
CONFORMANCE_MIRRORS_CPU = True

_lost = []


def _trigger(*args, **kwargs):
    _lost.append(True)
    raise RuntimeError("injected: device lost (the device is unusable from now on)")


def _broken_after_trigger(result, *args, **kwargs):
    if _lost:
        raise RuntimeError("injected: device unusable after an earlier fault")
    return result


if os.environ.get("FAULTY_BACKEND_OFF") != "1":
    faults.make_abort("aten::relu").install()
    faults.make_segfault("aten::exp").install()
    faults.make_hang("aten::sin").install()
    faults.override("aten::cos", _trigger, receives="args").install()
    faults.override("aten::add.Tensor", _broken_after_trigger).install()
    faults.override("aten::mul.Tensor", _broken_after_trigger).install()
