"""A plain training loop: device picked at start, model and batches moved to it, CUDA seeded when present."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
if torch.cuda.is_available():
    torch.cuda.manual_seed_all(0)

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8)
y = x.sum(dim=1, keepdim=True)
losses = []
for step in range(5):
    xb, yb = x.to(device), y.to(device)
    loss = nn.functional.mse_loss(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(round(loss.item(), 4))
print("losses", losses)
