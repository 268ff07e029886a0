"""Single-device training with mixed precision, written for CUDA (input of the e2e test)."""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast


def build_model():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def main():
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(2.0 ** 10)  # positional init_scale
    inputs = torch.randn(64, 16).cuda(non_blocking=True)
    targets = torch.randint(0, 4, (64,)).to(device)
    losses = []
    for step in range(5):
        optimizer.zero_grad(set_to_none=True)
        with autocast(dtype=torch.bfloat16):
            logits = model(inputs)
            loss = F.cross_entropy(logits.float(), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    torch.cuda.synchronize()
    weight = model[0].weight.detach().cpu()
    json.dump({"device": inputs.device.type, "losses": losses, "weight_sum": weight.sum().item(),
               "scale": scaler.get_scale()}, sys.stdout)


if __name__ == "__main__":
    main()
