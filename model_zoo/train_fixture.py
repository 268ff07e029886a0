"""Train the tiny generation fixture: a character-level Llama that has memorised :data:`TEXT`.

Random-weight decoders make greedy decoding a coin toss: their top-2 logits are often within
rounding noise, so greedy tokens diverge after a dozen steps in bfloat16 even between two CPU
kernels, and token agreement says nothing. This script trains a 2-layer, hidden-64 Llama for a few
seconds on a short built-in text until its next-character predictions are confident, and writes

- ``model_zoo/fixtures/tiny_decoder.safetensors`` (float32 weights, about 0.4 MB), and
- ``model_zoo/fixtures/tiny_decoder.json`` (config, vocabulary, training summary).

Run it again only when the fixture must change (the files are committed)::

    python -m neuron_conformance.model_zoo.train_fixture [--steps 400] [--conformance-seed 0]

:func:`load_fixture` builds the model from the files (no download, no training).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

FIXTURE_DIR = Path(__file__).with_name("fixtures")
WEIGHTS = FIXTURE_DIR / "tiny_decoder.safetensors"
META = FIXTURE_DIR / "tiny_decoder.json"

#: The training text (written for this project).
TEXT = (
    "a device backend passes when it gives the cpu answer. "
    "the harness runs every operator on the device and on the cpu, then compares the two. "
    "small models run forward and backward, take a few optimizer steps and generate text. "
    "when a result differs, the localizer names the first module whose output moved. "
    "bfloat16 keeps eight bits of mantissa, float16 keeps eleven, float32 keeps twenty four. "
    "the reference in float64 decides which side is closer to the exact answer. "
    "greedy decoding picks the most likely next character at every step. "
    "a confident model agrees with itself across devices for many steps. "
)

CONFIG = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    max_position_embeddings=256,
    tie_word_embeddings=False,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def vocabulary(text: str = TEXT) -> list[str]:
    """Characters of ``text`` in sorted order, after three reserved ids (pad, bos, eos)."""
    return ["<pad>", "<bos>", "<eos>"] + sorted(set(text))


def encode(s: str, vocab: list[str]) -> torch.Tensor:
    """Token ids ``(len(s),)`` of ``s``.

    Raises:
        ValueError: ``s`` contains a character outside the vocabulary.
    """
    index = {c: i for i, c in enumerate(vocab)}
    missing = sorted({c for c in s if c not in index})
    if missing:
        raise ValueError(f"encode: characters {missing!r} are not in the fixture vocabulary")
    return torch.tensor([index[c] for c in s], dtype=torch.long)


def decode(ids, vocab: list[str]) -> str:
    return "".join(vocab[int(i)] if int(i) >= 3 else "" for i in ids)


def _make_model(vocab_size: int, seed: int):
    import transformers  # deferred: optional dependency (the models extra)

    config = transformers.LlamaConfig(vocab_size=vocab_size, **CONFIG)
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM._from_config(config, attn_implementation="eager", dtype=torch.float32)


def train(steps: int = 400, seed: int = 0, batch: int = 8, window: int = 48, lr: float = 3e-3, log: bool = False):
    """Train the fixture model on :data:`TEXT`; returns ``(model, vocab, summary dict)``."""
    vocab = vocabulary()
    data = encode(TEXT, vocab)
    model = _make_model(len(vocab), seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    start = time.time()
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        starts = torch.randint(0, len(data) - window - 1, (batch,), generator=gen)
        x = torch.stack([data[s : s + window] for s in starts.tolist()])
        out = model(input_ids=x, labels=x)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        opt.step()
        loss = out.loss.detach()
        for group in opt.param_groups:  # linear decay to 10% keeps the end of training stable
            group["lr"] = lr * (1 - 0.9 * (step + 1) / steps)
        if log and (step + 1) % 50 == 0:
            print(f"step {step + 1}/{steps}: loss {float(loss):.4f} ({time.time() - start:.0f} s)", flush=True)
    model.eval()
    summary = {
        "steps": steps,
        "seed": seed,
        "batch": batch,
        "window": window,
        "final_loss": float(loss),
        "seconds": round(time.time() - start, 1),
    }
    return model, vocab, summary


def save(model, vocab: list[str], summary: dict) -> None:
    """Write the weights (safetensors) and the metadata JSON to :data:`FIXTURE_DIR`."""
    from safetensors.torch import save_file  # deferred: optional dependency (the models extra)

    FIXTURE_DIR.mkdir(exist_ok=True)
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(WEIGHTS))
    META.write_text(json.dumps({"config": CONFIG, "vocab": vocab, "training": summary}, indent=1) + "\n")


def load_fixture(dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
    """Build the trained fixture model from the committed files; returns ``(model, vocab)``.

    Raises:
        FileNotFoundError: the fixture files are missing (run ``python -m neuron_conformance.model_zoo.train_fixture``).
    """
    import transformers  # deferred: optional dependency (the models extra)
    from safetensors.torch import load_file  # deferred: optional dependency (the models extra)

    if not WEIGHTS.exists() or not META.exists():
        raise FileNotFoundError(
            f"generation fixture missing: {WEIGHTS} / {META}; "
            f"run `python -m neuron_conformance.model_zoo.train_fixture` to create it"
        )
    meta = json.loads(META.read_text())
    vocab = meta["vocab"]
    config = transformers.LlamaConfig(vocab_size=len(vocab), **meta["config"])
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="eager", dtype=torch.float32)
    model.load_state_dict(load_file(str(WEIGHTS)))
    model.eval()
    return model.to(dtype).to(device), vocab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps (default 400)")
    parser.add_argument(
        "--seed", "--conformance-seed", type=int, default=0, help="seed for init and batches (default 0)"
    )
    args = parser.parse_args(argv)
    model, vocab, summary = train(steps=args.steps, seed=args.seed, log=True)
    save(model, vocab, summary)
    print(f"wrote {WEIGHTS} ({WEIGHTS.stat().st_size} bytes) and {META}: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
