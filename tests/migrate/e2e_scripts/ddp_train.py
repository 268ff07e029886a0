"""DDP training launched one process per rank (torchrun-style environment), written for CUDA."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2).cuda()
    ddp_model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.5)

    gen = torch.Generator().manual_seed(100 + rank)
    data = torch.randn(4, 8, generator=gen).cuda(local_rank)
    for _ in range(3):
        optimizer.zero_grad()
        loss = ddp_model(data).pow(2).mean()
        loss.backward()
        optimizer.step()

    total = torch.tensor([float(rank + 1)], device="cuda")
    dist.all_reduce(total)
    torch.cuda.synchronize()
    if rank == 0:
        json.dump({"device": data.device.type, "weight": model.weight.detach().cpu().tolist(),
                   "bias": model.bias.detach().cpu().tolist(), "total": total.item()}, sys.stdout)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
