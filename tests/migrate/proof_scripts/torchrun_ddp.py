"""A torchrun-style DDP worker: rank and local rank from the environment, NCCL on CUDA, gloo otherwise."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

rank = int(os.environ.get("RANK", "0"))
world_size = int(os.environ.get("WORLD_SIZE", "1"))
os.environ.setdefault("LOCAL_RANK", "0")
if torch.cuda.is_available():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
else:
    device = torch.device("cpu")
backend = "nccl" if torch.cuda.is_available() else "gloo"
store = dist.FileStore(os.path.abspath("ddp_store"), world_size)
dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
torch.manual_seed(0)
model = nn.Linear(4, 2).to(device)
ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
for _ in range(3):
    loss = ddp(torch.ones(8, 4, device=device)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
total = torch.tensor([loss.item()], device=device)
dist.all_reduce(total)
print("world", dist.get_world_size(), "loss", round(total.item(), 4))
dist.destroy_process_group()
