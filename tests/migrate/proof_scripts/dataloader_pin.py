"""A DataLoader that pins memory when CUDA is present, batches moved with non_blocking copies."""
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ds = TensorDataset(torch.arange(24.0).reshape(12, 2), torch.arange(12))
loader = DataLoader(ds, batch_size=4, shuffle=False, num_workers=0, pin_memory=torch.cuda.is_available())
sums = []
for xb, yb in loader:
    xb = xb.to(device, non_blocking=True)
    yb = yb.to(device, non_blocking=True)
    sums.append((xb.sum().item(), int(yb.sum())))
print("batches", sums)
