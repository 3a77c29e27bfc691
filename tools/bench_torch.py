#!/usr/bin/python3
"""The PyTorch peer of bench/train: torchvision's model, SGD training steps on random
data, median step time after warm-up. Run with Debian's PyTorch (/usr/bin/python3).

usage: tools/bench_torch.py MODEL BATCH SIZE THREADS STEPS WARMUP
prints one line: median_seconds=<float>
"""
import statistics
import sys
import time

import torch
import torchvision


def main():
    name, batch, size, threads, steps, warmup = sys.argv[1], *map(int, sys.argv[2:7])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = getattr(torchvision.models, name)()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 1000, (batch,))
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    print("median_seconds=%.6f" % statistics.median(times))


if __name__ == "__main__":
    main()
