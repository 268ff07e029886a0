"""An AMP loop with the old torch.cuda.amp spellings, enabled only on CUDA."""
import torch
import torch.nn as nn

use_amp = torch.cuda.is_available()
device = "cuda" if use_amp else "cpu"
torch.manual_seed(0)
model = nn.Linear(8, 4).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
x = torch.randn(16, 8, device=device)
losses = []
for _ in range(4):
    with torch.cuda.amp.autocast(enabled=use_amp):
        loss = model(x).float().pow(2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    losses.append(round(loss.item(), 4))
print("amp", use_amp, "losses", losses)
