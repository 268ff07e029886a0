"""Checkpoint save and load with a map_location chosen for the device."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 3)
if torch.cuda.is_available():
    model = model.cuda()
torch.save({"model": model.state_dict(), "step": 7}, "ckpt.pt")
map_location = "cuda:0" if torch.cuda.is_available() else "cpu"
state = torch.load("ckpt.pt", map_location=map_location)
restored = nn.Linear(3, 3).to(map_location)
restored.load_state_dict(state["model"])
same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), restored.state_dict().values()))
print("step", state["step"], "restored equal", same, "weight sum", round(restored.weight.sum().item(), 4))
