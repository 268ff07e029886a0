"""``UntypedStorage.resize_`` on neuron storages: FSDP2's free (``resize_(0)``) and re-allocation only.

Installed by ``neuron_conformance.emulator.install()`` (storage guards, emulator/storage.py).
"""

from __future__ import annotations

import gc

import pytest
import torch

from neuron_conformance.emulator import storage as emu_storage


def test_install_patches_storage_resize():
    assert torch.UntypedStorage.resize_ is emu_storage._guarded_storage_resize


def test_free_releases_the_bytes_and_realloc_gives_a_fresh_block():
    gc.collect()
    before = torch.neuron.memory_allocated()
    t = torch.arange(256, dtype=torch.float32, device="neuron")
    view = t[10:20]
    st = t.untyped_storage()
    gc.collect()
    assert torch.neuron.memory_allocated() == before + 1024
    stats0 = torch.neuron.memory_stats()

    assert st.resize_(0) is st
    assert st.nbytes() == 0 and st.data_ptr() == 0
    assert t.untyped_storage().nbytes() == 0  # every tensor over the storage sees the free
    assert torch.neuron.memory_allocated() == before
    assert torch.neuron.memory_stats()["allocation.all.freed"] == stats0["allocation.all.freed"] + 1
    assert not hasattr(st, "_emu_owner")

    st.resize_(1024)  # FSDP2's alloc_storage: back to the original size
    assert st.nbytes() == 1024 and st.data_ptr() != 0
    assert t.data_ptr() == st.data_ptr() and view.data_ptr() == st.data_ptr() + 40
    assert torch.neuron.memory_allocated() == before + 1024
    assert torch.neuron.memory_stats()["allocation.all.allocated"] == stats0["allocation.all.allocated"] + 1
    t.copy_(torch.arange(256, dtype=torch.float32) * 2)  # an all-gather writes the block
    assert view.cpu().tolist() == [2.0 * i for i in range(10, 20)]
    assert torch.equal(t.cpu(), torch.arange(256, dtype=torch.float32) * 2)
    # the CPU alias cached on the storage follows the new block
    assert emu_storage.cpu_alias(t).data_ptr() == st.data_ptr()
    del t, view, st
    gc.collect()
    assert torch.neuron.memory_allocated() == before


def test_dying_while_freed_is_counted_once():
    gc.collect()
    stats0 = torch.neuron.memory_stats()
    t = torch.ones(8, device="neuron")
    t.untyped_storage().resize_(0)
    del t
    gc.collect()
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] == stats0["allocated_bytes.all.current"]
    assert stats["active.all.current"] == stats0["active.all.current"]
    assert stats["allocation.all.freed"] == stats0["allocation.all.freed"] + 1


def test_other_sizes_raise_not_implemented():
    t = torch.ones(4, device="neuron")
    st = t.untyped_storage()
    st.resize_(16)  # current size: no-op
    assert torch.equal(t.cpu(), torch.ones(4))
    with pytest.raises(NotImplementedError, match=r"resize_\(32\) on a neuron storage of 16 bytes"):
        st.resize_(32)
    st.resize_(0)
    with pytest.raises(NotImplementedError, match=r"size it had before resize_\(0\) \(16\)"):
        st.resize_(8)
    with pytest.raises(TypeError, match="must be int"):
        st.resize_(16.0)
    st.resize_(16)
    fresh = torch.UntypedStorage(0, device="neuron")
    with pytest.raises(NotImplementedError, match="resizePrivateUse1Bytes"):
        fresh.resize_(8)


def test_cpu_storages_keep_torch_behaviour():
    cpu = torch.ones(4).untyped_storage()
    cpu.resize_(32)
    assert cpu.nbytes() == 32
    cpu.resize_(8)
    assert cpu.nbytes() == 8


def test_fsdp2_free_and_alloc_storage_helpers():
    fsdp_param = pytest.importorskip("torch.distributed.fsdp._fully_shard._fsdp_param")
    param = torch.randn(3, 5, device="neuron")
    fsdp_param.free_storage(param)
    assert param.untyped_storage().size() == 0
    fsdp_param.alloc_storage(param)
    assert param.untyped_storage().size() == 3 * 5 * 4
    param.fill_(1.5)
    assert param.cpu().sum().item() == 1.5 * 15


def test_api_support_reports_what_works():
    from neuron_conformance.emulator import api_support

    support = api_support()
    assert support["UntypedStorage.resize_"] == "missing"  # arbitrary sizes still need the C++ hook
    assert support["UntypedStorage.resize_(0) and back (FSDP2)"] == "shim"
