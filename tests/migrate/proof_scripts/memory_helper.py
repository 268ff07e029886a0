"""A memory helper: peak-memory report on CUDA, nothing measured on CPU."""
import torch


def report(tag):
    if not torch.cuda.is_available():
        return f"{tag}: no accelerator memory"
    mb = torch.cuda.max_memory_allocated() / 2**20
    return f"{tag}: peak {mb >= 0}"


if torch.cuda.is_available():
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.empty_cache()
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.ones(256, 256, device=dev)
print(report("after alloc"), float(x.sum()))
del x
if torch.cuda.is_available():
    torch.cuda.empty_cache()
print(report("after free"))
