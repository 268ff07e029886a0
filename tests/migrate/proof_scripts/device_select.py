"""Device selection from the command line, with a .cuda() move under an availability guard."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--gpu", type=int, default=0)
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args([])
use_cuda = not args.no_cuda and torch.cuda.is_available()
x = torch.linspace(0, 1, 5)
if args.gpu is not None and torch.cuda.is_available():
    x = x.cuda(args.gpu)
n = torch.cuda.device_count()
print("use_cuda", use_cuda, "devices", n, "sum", round(x.sum().item(), 4))
