"""The floating dtypes the model checks run in, and their record names (``"float32"``, ...)."""

from __future__ import annotations

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """``torch.float32``/``"float32"``-style dtype to a ``torch.dtype``.

    Raises:
        ValueError: the dtype is not one of :data:`DTYPES`.
    """
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"model checks run in {tuple(DTYPES)}, got dtype={dtype!r}")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (the ``dtype`` field of a record)."""
    return str(dtype).removeprefix("torch.")
