"""NM308 follows an availability check through a variable and through the branch it decides
(``use_cuda = torch.cuda.is_available()`` then ``if use_cuda: ... pin_memory=True``), and never
stops NM101 from widening the check over it."""

from neuron_conformance.migrate.engine import Settings, check_source
from neuron_conformance.migrate.registry import selection

ALL = selection(None, None)


def nm308(src, **settings):
    result = check_source(src, Settings(ALL, **settings))
    assert result.error is None
    return result, [(v.line, v.message) for v in result.violations if v.code == "NM308"]


def test_flag_set_from_the_check_gates_the_pinning_it_guards():
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def build(args, ds):\n"
        "    use_cuda = torch.cuda.is_available() and not args.cpu\n"
        "    opts = {'batch_size': 4}\n"
        "    if use_cuda:\n"
        "        opts['num_workers'] = 2\n"
        "        loader = DataLoader(ds, pin_memory=True, **opts)\n"
        "    else:\n"
        "        loader = DataLoader(ds, pin_memory=True)\n"
        "    return loader\n"
    )
    _, found = nm308(src)
    assert [line for line, _ in found] == [8]  # the `else` branch is not gated
    assert "`use_cuda`" in found[0][1] and "torch.cuda.is_available()" in found[0][1]


def test_flag_used_as_the_value_and_attribute_flags():
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def build(opt, ds):\n"
        "    opt.gpu = torch.cuda.is_available()\n"
        "    a = DataLoader(ds, pin_memory=opt.gpu)\n"
        "    b = DataLoader(ds, pin_memory=opt.other)\n"
        "    kw = {'pin_memory': True} if opt.gpu else {'pin_memory': False}\n"
        "    return a, b, kw\n"
    )
    _, found = nm308(src)
    assert [line for line, _ in found] == [5, 7]


def test_negated_or_reassigned_flags_do_not_gate():
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def build(ds):\n"
        "    on_gpu = torch.cuda.is_available()\n"
        "    if not on_gpu:\n"
        "        a = DataLoader(ds, pin_memory=True)\n"
        "    on_gpu = False\n"
        "    if on_gpu:\n"
        "        b = DataLoader(ds, pin_memory=True)\n"
        "    if torch.cuda.is_available():\n"
        "        c = DataLoader(ds, pin_memory=False)\n"
        "    return a, b, c\n"
    )
    assert nm308(src)[1] == []


def test_pinning_under_a_widened_check_does_not_block_the_widening():
    """The finding is advisory: NM101 still rewrites the `if`, and NM308 stays to say what it reaches."""
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "def build(ds):\n"
        "    if torch.cuda.is_available():\n"
        "        return DataLoader(ds, pin_memory=True)\n"
        "    return DataLoader(ds)\n"
    )
    result, found = nm308(src, fix=True)
    assert "if torch.accelerator.is_available():" in result.new_source
    assert [line for line, _ in found] == [5]
    assert "torch.accelerator.is_available()" in found[0][1]
    assert [v.code for v in result.violations] == ["NM308"]
