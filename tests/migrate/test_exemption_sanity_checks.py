"""Exemptions for sanity checks and requests for CUDA itself (``migrate/exemptions/sanity_checks.py``). Each case has an example that is quiet and a near miss that is still reported (and still fixed where the
rule has a fix). The snippets are written for these tests."""

from tests.migrate.snippets import codes, found, pairs


def test_completed_cuda_request_is_quiet_but_other_code_under_it_is_reported():
    """Should not report `if opts.device == "cuda": opts.device = f"cuda:{rank}"`; should report a
    `.cuda()` under the same test."""
    quiet = (
        "import torch\ndef f(opts):\n    if opts.device == 'cuda':\n"
        "        opts.device = f'cuda:{opts.local_rank}'\n    return torch.device(opts.device)\n"
    )
    assert pairs(quiet) == []
    near = "import torch\ndef f(opts, model):\n    if opts.device == 'cuda':\n        model = model.cuda()\n"
    assert [c for _, c in pairs(near)] == ["NM111", "NM108"]


class TestCudaSanityCheck:
    GUARD = (
        "import torch\n"
        "def setup(cfg, accel):\n"
        "    if accel.device_name() == 'cuda' and cfg.graphs:\n"
        "        assert cfg.torch_is_new, 'CUDA graphs need torch 1.10 or newer'\n"
    )
    ASSERT = (
        "import torch\n"
        "def check(cfg, accel):\n"
        "    if cfg.direct_storage:\n"
        "        assert accel.device_name() == 'cuda', 'direct storage is only supported on CUDA'\n"
    )

    def test_guard_of_a_cuda_assert_is_quiet(self):
        """Should not report the CUDA test of an ``if`` whose body is one assert naming CUDA."""
        assert codes(self.GUARD) == []

    def test_guard_of_a_generic_assert_is_reported(self):
        """Should still report the test when the assert's message does not name CUDA, or when the
        body does something else as well."""
        assert (3, "NM111") in found(self.GUARD.replace("CUDA graphs need", "this feature needs"))
        assert (3, "NM111") in found(self.GUARD + "        cfg.graphs_on = True\n")

    def test_assert_of_cuda_with_a_cuda_message_is_quiet(self):
        """Should not report an assert that the device is CUDA whose message names CUDA (a feature
        the author supports on CUDA only)."""
        assert codes(self.ASSERT) == []

    def test_assert_of_cuda_without_a_cuda_message_is_reported(self):
        """Should still report the assert whose message does not name CUDA, or that has none."""
        assert (4, "NM111") in found(self.ASSERT.replace("only supported on CUDA", "not supported here"))
        assert (4, "NM111") in found(self.ASSERT.replace(", 'direct storage is only supported on CUDA'", ""))
