#!/usr/bin/python3
"""PyTorch's resident-set growth while it trains, measured as `remat train` measures its
own (src/core/rss.c): the high-water mark VmHWM of /proc/self/status is reset (by
writing "5" to /proc/self/clear_refs) and VmRSS read at a mark; after the steps, the
growth is VmHWM minus that VmRSS. Run with Debian's PyTorch (/usr/bin/python3).

Two marks, both printed:
  model   just before the model is built: the growth covers what remat's trainer
          allocates (parameters, their gradients, momentum, the input batch and labels)
          and what the steps take (activations, gradients, kernel scratch, oneDNN's
          primitives and PyTorch's allocator caches). remat's own mark is the same point:
          remat_trainer_new, before it allocates anything. This is the figure to compare.
  step    just before the first step (model, optimizer and batch built): the steps alone.
Imports, the interpreter and torch's libraries are resident before either mark, so they
are not counted; the first step's lazily created state (gradients, momentum buffers,
oneDNN primitives, OpenMP threads) is.

usage: tools/torch_rss.py [MODEL BATCH SIZE THREADS STEPS]   (default resnet50 8 224 2 2)
prints key=value lines, bytes.
"""
import sys

import torch
import torchvision


def status_bytes(key):
    """The 'key:  N kB' line of /proc/self/status, in bytes (0 when absent)."""
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name == key:
                return int(value.split()[0]) * 1024
    return 0


def mark():
    """Resets the high-water mark; returns VmRSS just after (the 'before' figure)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_bytes("VmRSS")


def main():
    args = sys.argv[1:] or ["resnet50", "8", "224", "2", "2"]
    name, batch, size, threads, steps = args[0], *map(int, args[1:5])
    torch.set_num_threads(threads)
    torch.manual_seed(1)

    before_model = mark()
    model = getattr(torchvision.models, name)()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 1000, (batch,))
    built = status_bytes("VmRSS")
    peak_build = status_bytes("VmHWM")

    before_step = mark()
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    peak = status_bytes("VmHWM")
    params = sum(p.numel() for p in model.parameters()) * 4

    print("model=%s batch=%d size=%d threads=%d steps=%d torch=%s" %
          (name, batch, size, threads, steps, torch.__version__))
    print("param_bytes=%d" % params)
    print("resident_like_remat_bytes=%d" % (3 * params + x.numel() * 4 + y.numel() * 4))
    print("rss_before_model_bytes=%d" % before_model)
    print("rss_after_build_bytes=%d" % built)
    print("rss_before_step_bytes=%d" % before_step)
    print("rss_peak_bytes=%d" % peak)
    # The two marks: the peak since the model mark is the larger of the build's and the
    # steps' (the second reset forgot the first).
    print("growth_from_model_bytes=%d" % (max(peak_build, peak) - before_model))
    print("growth_from_step_bytes=%d" % (peak - before_step))
    print("loss=%.6f" % loss.item())


if __name__ == "__main__":
    main()
