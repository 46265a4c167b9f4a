#!/usr/bin/python3
"""The peer a user would pick: the Fashion-MNIST CNN of examples/fashion_mnist.cpp as a plain
PyTorch training loop in Python (Debian's python3-torch), for speed and accuracy comparisons.

Same model (conv 1->32 3x3, ReLU, 2x2 max-pool; conv 32->64 3x3, ReLU, 2x2 max-pool; linear
1600->10), input normalisation, batch, optimizer and thread count as the example in its 3-minute
configuration; --dropout 0.4 --flip give the example's regularised model (runs past 10 epochs).

  /usr/bin/python3 bench/fashion_mnist_pytorch.py --steps 500            # time per step
  /usr/bin/python3 bench/fashion_mnist_pytorch.py --seconds 180 --eval-at 60,180

Prints one JSON object per line: {"event": "eval", ...} at each --eval-at time or step, and
{"event": "done", "ms_per_step": ..., ...} at the end.
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            with open(candidate, "rb") as f:
                data = f.read()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            break
    else:
        sys.exit(f"fashion_mnist_pytorch.py: {path}(.gz) not found "
                 "(install the Debian package dataset-fashion-mnist)")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte"))
    return images, labels.long()


def to_input(images_u8):
    return ((images_u8.float() / 255.0 - MEAN) / STD).unsqueeze(1)


class Net(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(64 * 5 * 5, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        return self.fc(self.drop(x) if self.drop.p > 0 else x)


def random_flip(x):
    return torch.where(torch.rand(x.size(0), 1, 1, 1) < 0.5, x.flip(3), x)


def lr_at(step, args, total):
    if args.schedule == "none":
        return args.lr
    if step < args.warmup_steps:
        return args.lr * step / args.warmup_steps
    t = min(step - args.warmup_steps, total - args.warmup_steps) / max(1, total - args.warmup_steps)
    return args.lr * 0.5 * (1 + math.cos(math.pi * t))


@torch.no_grad()
def evaluate(net, images, labels):
    net.eval()
    correct = 0
    for i in range(0, len(images), 1000):
        logits = net(to_input(images[i:i + 1000]))
        correct += (logits.argmax(1) == labels[i:i + 1000]).sum().item()
    net.train()
    return correct / len(images)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps")
    p.add_argument("--seconds", type=float, default=0, help="stop after this many seconds of training")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--schedule", choices=["none", "warmup-cosine"], default="none")
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--total-steps", type=int, default=0, help="the schedule's length (default --steps)")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    p.add_argument("--eval-at", default="", help="comma-separated training seconds (or steps with --steps) to evaluate at")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flip", action="store_true", help="mirror training images at random")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout before the linear layer")
    args = p.parse_args()
    if not args.steps and not args.seconds:
        p.error("give --steps or --seconds")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data_dir, "train")
    test_x, test_y = load(args.data_dir, "test")
    net = Net(args.dropout)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    total = args.total_steps or args.steps
    eval_at = sorted(float(t) for t in args.eval_at.split(",") if t)
    gen = torch.Generator().manual_seed(args.seed)
    order, pos, step = torch.randperm(len(train_x), generator=gen), 0, 0
    train_time, step_times = 0.0, []
    while True:
        if args.steps and step >= args.steps:
            break
        if args.seconds and train_time >= args.seconds:
            break
        t0 = time.perf_counter()
        if pos + args.batch_size > len(order):
            order, pos = torch.randperm(len(train_x), generator=gen), 0
        idx = order[pos:pos + args.batch_size]
        pos += args.batch_size
        x, y = to_input(train_x[idx]), train_y[idx]
        if args.flip:
            x = random_flip(x)
        if args.schedule != "none":
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args, total)
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        step += 1
        dt = time.perf_counter() - t0
        train_time += dt
        step_times.append(dt)
        clock = step if args.steps else train_time
        while eval_at and clock >= eval_at[0]:
            eval_at.pop(0)
            print(json.dumps({"event": "eval", "step": step, "train_seconds": round(train_time, 2),
                              "test_accuracy": evaluate(net, test_x, test_y)}), flush=True)
    step_times.sort()
    steps_per_epoch = len(train_x) // args.batch_size
    median = step_times[len(step_times) // 2]
    print(json.dumps({"event": "done", "steps": step, "train_seconds": round(train_time, 2),
                      "ms_per_step": round(1e3 * train_time / max(step, 1), 3),
                      "median_ms_per_step": round(1e3 * median, 3),
                      "seconds_per_epoch": round(median * steps_per_epoch, 1),
                      "threads": torch.get_num_threads(),
                      "test_accuracy": evaluate(net, test_x, test_y)}), flush=True)


if __name__ == "__main__":
    main()
