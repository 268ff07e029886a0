"""A seeding helper: Python, NumPy and torch seeded, CUDA seeded and cuDNN made deterministic when present."""
import random

import numpy as np
import torch


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


seed_everything(1234)
dev = "cuda" if torch.cuda.is_available() else "cpu"
print("draws", random.random(), int(np.random.randint(100)), torch.rand(2).tolist(),
      torch.randn(2, device="cpu").to(dev).sum().item() != 0)
