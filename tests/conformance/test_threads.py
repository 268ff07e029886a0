"""neuron_conformance.conformance.pytest_plugin.threads: xdist workers share the cores instead of each taking all of them."""

from __future__ import annotations

import pytest
import torch

from neuron_conformance.conformance.pytest_plugin import threads


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_workers_split_the_cores(monkeypatch, restore_threads):
    for var in threads.USER_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    assert threads.share_cores(2) == 4 and torch.get_num_threads() == 4
    assert threads.share_cores(16) == 1 and torch.get_num_threads() == 1


def test_a_user_choice_is_left_alone(monkeypatch, restore_threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    torch.set_num_threads(2)
    assert threads.share_cores(2) is None and torch.get_num_threads() == 2


def test_bad_worker_count():
    with pytest.raises(ValueError, match="workers"):
        threads.share_cores(0)


def test_each_worker_of_a_run_gets_its_share(pytester, monkeypatch):
    for var in threads.USER_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(
        test_t="""
import torch
from neuron_conformance.conformance.pytest_plugin.threads import available_cores

def test_width():
    assert torch.get_num_threads() == max(1, available_cores() // 2)
"""
    )
    result = pytester.runpytest_subprocess(
        "--conformance-device",
        "cpu",
        "--conformance-report-dir",
        "out",
        "--conformance-no-report",
        "-n",
        "2",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=1)
