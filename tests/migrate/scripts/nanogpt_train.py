# Source: https://github.com/karpathy/nanoGPT/blob/3adf61e1/train.py (and configurator.py)
# Trimmed to run on a CPU in seconds: the GPT model replaced by a two-layer MLP over random tokens, no DDP,
# wandb, compile or learning-rate schedule, 6 iterations; `--key=value` overrides as configurator.py reads them.
# The device, dtype, autocast, GradScaler and seeding code is the original's.
# prove: --cpu-args "--device=cpu --dtype=float32" --ignore "^Overriding: device" -- --dtype=float32
import os
import sys
import time
from ast import literal_eval
from contextlib import nullcontext

import torch

out_dir = 'out'
eval_interval = 3
max_iters = 6
batch_size = 4
block_size = 8
vocab_size = 32
learning_rate = 1e-3
backend = 'nccl' # 'nccl', 'gloo', etc.
device = 'cuda' # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps' on macbooks
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16' # 'float32', 'bfloat16', or 'float16', the latter will auto implement a GradScaler
config_keys = [k for k,v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
for arg in sys.argv[1:]:
    key, val = arg[2:].split('=')
    try:
        attempt = literal_eval(val)
    except (SyntaxError, ValueError):
        attempt = val
    print(f"Overriding: {key} = {attempt}")
    globals()[key] = attempt
config = {k: globals()[k] for k in config_keys} # will be useful for logging

os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True # allow tf32 on matmul
torch.backends.cudnn.allow_tf32 = True # allow tf32 on cudnn
device_type = 'cuda' if 'cuda' in device else 'cpu' # for later use in torch.autocast
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

data = torch.randint(vocab_size, (512,))
def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i+block_size] for i in ix])
    y = torch.stack([data[i+1:i+1+block_size] for i in ix])
    if device_type == 'cuda':
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y

model = torch.nn.Sequential(torch.nn.Embedding(vocab_size, 16), torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, vocab_size))
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

X, Y = get_batch()
t0 = time.time()
for iter_num in range(max_iters + 1):
    with ctx:
        logits = model(X)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), Y.view(-1))
    X, Y = get_batch()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    print(f"iter {iter_num}: loss {loss.item():.4f}, time {dt*1000:.2f}ms")
    if iter_num > 0 and iter_num % eval_interval == 0:
        print(f"saving checkpoint to {out_dir}")
        torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'config': config}, os.path.join(out_dir, 'ckpt.pt'))
