"""An mp.spawn launcher: one worker process per GPU (one on a CPU-only host), results written by the workers."""
import os

import torch
import torch.multiprocessing as mp


def worker(rank, world_size, out_dir):
    device = torch.device(f"cuda:{rank}") if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(rank)
    value = (torch.arange(4.0, device=device) * 2 + torch.randn(4, device="cpu").to(device)).sum().item()
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as fh:
        fh.write(f"{device.type != 'cpu'} {value:.4f}\n")


if __name__ == "__main__":
    world_size = max(1, min(torch.cuda.device_count(), 1))
    mp.spawn(worker, args=(world_size, os.getcwd()), nprocs=world_size, join=True)
    for r in range(world_size):
        with open(f"rank{r}.txt") as fh:
            print("rank", r, "on accelerator, value:", fh.read().strip())
