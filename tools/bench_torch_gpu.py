#!/usr/bin/env python3
"""The PyTorch peer of bench/gpu, on the GPU: torchvision's model, SGD steps on random
data. Run with a PyTorch that has CUDA (the GPU machine's python3).

usage: tools/bench_torch_gpu.py speed MODEL BATCH SIZE STEPS
           median step seconds after 3 warm-up steps, and torch.cuda.max_memory_allocated
       tools/bench_torch_gpu.py peak MODEL BATCH SIZE CHECKPOINT_SEGMENTS
           max_memory_allocated of one step (segments 0: plain; k: the model's layers run
           through torch.utils.checkpoint.checkpoint_sequential in k segments)
       tools/bench_torch_gpu.py maxbatch MODEL SIZE CAP_BYTES CHECKPOINT_SEGMENTS
           the largest batch whose step fits the cap (bisection on out-of-memory)
       tools/bench_torch_gpu.py maxdepth BATCH SIZE CAP_BYTES
           the deepest ResNet with bottleneck blocks [3, 8, k, 3] (depth 3k + 44) whose
           plain step fits the cap
prints key=value lines.
"""
import statistics
import sys
import time

import torch
import torchvision
from torch.utils.checkpoint import checkpoint_sequential


def build(name):
    torch.manual_seed(1)
    m = getattr(torchvision.models, name)().cuda()
    m.train()
    return m


def layers(model):
    """ResNet as a sequence (what checkpoint_sequential needs)."""
    return torch.nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool, model.layer1,
                               model.layer2, model.layer3, model.layer4, model.avgpool,
                               torch.nn.Flatten(1), model.fc)


def step(model, opt, x, y, segments):
    opt.zero_grad(set_to_none=True)
    if segments:
        x.requires_grad_(True)
        out = checkpoint_sequential(layers(model), segments, x)
    else:
        out = model(x)
    torch.nn.functional.cross_entropy(out, y).backward()
    opt.step()


def peak(name, batch, size, segments, cap=None):
    model = build(name) if isinstance(name, str) else name
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step(model, opt, x, y, segments)
    step(model, opt, x, y, segments)  # momentum buffers exist from the second step
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def largest(fits):
    """The largest n >= 0 with fits(n) (fits(0) is taken as true), by doubling then
    bisection."""
    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def main():
    mode = sys.argv[1]
    if mode == "speed":
        name, batch, size, steps = sys.argv[2], *map(int, sys.argv[3:6])
        model = build(name)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        x = torch.randn(batch, 3, size, size, device="cuda")
        y = torch.randint(0, 1000, (batch,), device="cuda")
        times = []
        for i in range(3 + steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(model, opt, x, y, 0)
            torch.cuda.synchronize()
            if i >= 3:
                times.append(time.perf_counter() - t0)
        print("median_seconds=%.6f" % statistics.median(times))
        print("max_memory_allocated=%d" % torch.cuda.max_memory_allocated())
    elif mode == "peak":
        name, batch, size, seg = sys.argv[2], *map(int, sys.argv[3:6])
        print("max_memory_allocated=%d" % peak(name, batch, size, seg))
    elif mode == "maxbatch":
        name, size, cap, seg = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        def fits(b):
            try:
                ok = peak(name, b, size, seg) <= cap
            except torch.cuda.OutOfMemoryError:
                ok = False
            torch.cuda.empty_cache()
            return ok
        print("max_batch=%d" % largest(fits))
    elif mode == "maxdepth":
        batch, size, cap = map(int, sys.argv[2:5])
        from torchvision.models.resnet import Bottleneck, ResNet

        def fits(k):
            try:
                torch.manual_seed(1)
                m = ResNet(Bottleneck, [3, 8, k, 3]).cuda()
                m.train()
                ok = peak(m, batch, size, 0) <= cap
                del m
            except torch.cuda.OutOfMemoryError:
                ok = False
            torch.cuda.empty_cache()
            return ok
        k = largest(fits)
        print("max_depth=%d" % (3 * k + 44 if k else 0))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
