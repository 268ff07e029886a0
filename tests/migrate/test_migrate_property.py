"""Property test: on generated snippets of CUDA idioms the fixer never produces unparsable code and
is idempotent (a second --fix changes nothing), in both fix tiers."""

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_conformance.migrate import registry
from neuron_conformance.migrate.engine import Settings, check_source

ALL = registry.selection(None, None)

IMPORTS = [
    "import torch",
    "import torch as t",
    "import torch.cuda as tc",
    "from torch.cuda import Event",
    "from torch.cuda.amp import autocast, GradScaler",
    "import torch.distributed as dist",
    "from torch import cuda",
    "import os",
]
NAMES = st.sampled_from(["x", "batch", "model", "rank", "local_rank", "dev", "args.gpu", "self.net", "i"])
INTS = st.integers(min_value=0, max_value=3).map(str)
DEVICE_STRINGS = st.sampled_from(['"cuda"', '"cuda:0"', '"cuda:1"', 'f"cuda:{rank}"', '"cpu"', '"mps"'])


@st.composite
def expressions(draw):
    n, k, d = draw(NAMES), draw(INTS), draw(DEVICE_STRINGS)
    return draw(
        st.sampled_from(
            [
                f"{n}.cuda()",
                f"{n}.cuda({k}, non_blocking=True)",
                f"{n}.cuda({n})",
                f"{n}.to({k})",
                f"{n}.to({d})",
                f"torch.zeros(2, device={d})",
                f"torch.device({d})",
                "torch.cuda.is_available()",
                '"cuda" if torch.cuda.is_available() else "cpu"',
                'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
                "torch.cuda.device_count()",
                "torch.cuda.current_device()",
                f"torch.cuda.memory_allocated({k})",
                f"torch.cuda.max_memory_allocated(device={n})",
                "torch.cuda.Event(True)",
                "Event(enable_timing=True)",
                f"torch.cuda.Stream({n}, -1)",
                "GradScaler(2.0 ** 16)",
                "torch.cuda.amp.GradScaler()",
                "torch.amp.GradScaler()",
                "t.cuda.synchronize()",
                "tc.current_stream()",
                "cuda.mem_get_info()",
                f"torch.cuda.FloatTensor({k}, 2)",
                f"{n}.type(torch.cuda.HalfTensor)",
                "torch.accelerator.current_accelerator().type",
                f"{n} == {d}",
                f"{n}.is_cuda",
                "torch.version.cuda",
                "torch.cuda.get_device_name(0)",
                "dist.is_nccl_available()",
                "torch.cuda.OutOfMemoryError",
                "(torch.cuda.synchronize)",
                f"[{n}.cuda() for {n} in items]",
                f"lambda: {n}.cuda()",
            ]
        )
    )


@st.composite
def statements(draw):
    e, n, k = draw(expressions()), draw(NAMES).split(".")[0], draw(INTS)
    stmt = draw(
        st.sampled_from(
            [
                f"{n} = {e}",
                f"{e}",
                "torch.cuda.synchronize()",
                f"torch.cuda.synchronize(device={k})",
                "torch.cuda.empty_cache()",
                f"torch.cuda.set_device({n})",
                "torch.cuda.reset_peak_memory_stats()",
                f"torch.manual_seed({k})",
                f"torch.cuda.manual_seed_all({k})",
                "torch.cuda.manual_seed(1)",
                f"torch.accelerator.device_index({n})",
                'dist.init_process_group("nccl")',
                "torch.backends.cudnn.benchmark = True",
                'os.environ["CUDA_VISIBLE_DEVICES"] = "0"',
                f"if torch.cuda.is_available(): {n} = {e}",
                "a = 1; torch.cuda.empty_cache()",
            ]
        )
    )
    suffix = draw(st.sampled_from(["", "", "", "  # noqa", "  # noqa: NM201", "  # note"]))
    return stmt + suffix


@st.composite
def modules(draw):
    imports = draw(st.lists(st.sampled_from(IMPORTS), min_size=0, max_size=4, unique=True))
    body = draw(st.lists(statements(), min_size=1, max_size=6))
    lines = list(imports) + [""]
    for s in body:
        wrap = draw(st.sampled_from(["plain", "def", "if", "with", "class"]))
        if wrap == "plain":
            lines.append(s)
        elif wrap == "def":
            lines += ['def f(rank, x, batch, model, dev, i, items, device="cuda"):', "    " + s]
        elif wrap == "if":
            lines += ["if torch.cuda.is_available():", "    " + s, "else:", "    pass"]
        elif wrap == "with":
            lines += ["with torch.cuda.device(rank):", "    " + s]
        else:
            lines += ["class M(torch.nn.Module):", "    def forward(self, x):", "        " + s]
    return "\n".join(lines) + "\n"


def _check(src, unsafe):
    s = Settings(ALL, fix=True, unsafe_fixes=unsafe)
    first = check_source(src, s)
    assert first.error is None, (first.error, src)
    out = first.new_source or src
    ast.parse(out)
    second = check_source(out, s)
    assert second.error is None, (second.error, out)
    assert second.new_source is None, f"not idempotent:\n{src}\n-- first --\n{out}\n-- second --\n{second.new_source}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules(), st.booleans())
def test_fix_output_parses_and_is_idempotent(src, unsafe):
    _check(src, unsafe)


@settings(max_examples=60, deadline=None)
@given(modules())
def test_check_mode_never_changes_text_or_fails(src):
    result = check_source(src, Settings(ALL))
    assert result.error is None and result.new_source is None
