"""Memory report helper, written for CUDA."""
import json
import sys

import torch

MiB = 1024 ** 2


def memory_report(device=None):
    return {
        "allocated_mib": torch.cuda.memory_allocated(device=device) / MiB,
        "max_allocated_mib": torch.cuda.max_memory_allocated(device) / MiB,
        "reserved_mib": torch.cuda.memory_reserved(device) / MiB,
    }


def main():
    torch.cuda.reset_peak_memory_stats()
    before = memory_report()
    block = torch.empty(1024, 1024, device="cuda")  # 4 MiB of float32
    during = memory_report()
    del block
    torch.cuda.empty_cache()
    after = memory_report()
    json.dump({"before": before, "during": during, "after": after}, sys.stdout)


if __name__ == "__main__":
    main()
