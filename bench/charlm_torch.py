#!/usr/bin/python3
"""charlm_torch.py - the PyTorch peer of bench/charlm: the zoo's GPT-2 (src/models/
transformer.c, dropout off) trained in float32 with torch.optim.AdamW from the weights
remat starts from, on the batches remat draws. Run with Debian's PyTorch 1.13
(/usr/bin/python3); bench/charlm runs it and reads what it prints.

usage: bench/charlm_torch.py key=value ...
    corpus   the text file remat reads as bytes (vocabulary 256)
    params   remat's initial parameters (remat_trainer_save; docs/formats.md)
    steps, batch, seq, layers, heads, width, vocab
    lr, wd   AdamW's learning rate and weight decay (betas 0.9, 0.999, eps 1e-8)
    seed     the seed of remat_tokens_batch
    threads  torch.set_num_threads
    warmup   steps left out of the median step time (default 1)

The batches: step i, sequence b starts at off = h mod (count - seq) with
h = splitmix64(splitmix64(splitmix64(seed) ^ i) ^ b), redrawn as h = splitmix64(h)
while h >= 2^64 - (2^64 mod (count - seq)): remat_tokens_batch's documented scheme
(include/remat.h), recomputed here. The ids of sequence b are bytes off .. off + seq - 1,
its targets the bytes one further.

Prints, one per line: "params N" (scalars loaded), "blas NAME" (torch's BLAS_INFO),
"loss STEP VALUE" for every step
(the loss before that step's update, as remat_trainer_step_tokens reports it),
"batch_hash H" (sum over steps i and entries k of ids[k] * (k + 1) * (i + 1), which
bench/charlm computes from remat's own batches), "median_seconds S".
"""
import math
import re
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

MASK = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def start_of(seed, step, b, n):
    """The start of sequence b of a step among n starts (remat_tokens_batch)."""
    h = splitmix64(splitmix64(splitmix64(seed) ^ step) ^ b)
    rem = ((1 << 64) - n) % n
    while rem and h >= (1 << 64) - rem:
        h = splitmix64(h)
    return h % n


def batch(data, seed, step, nb, seq):
    """ids and targets (nb, seq) int64 of one step."""
    n = len(data) - seq
    offs = [start_of(seed, step, b, n) for b in range(nb)]
    ids = np.stack([data[o:o + seq] for o in offs]).astype(np.int64)
    tgt = np.stack([data[o + 1:o + seq + 1] for o in offs]).astype(np.int64)
    return torch.from_numpy(ids), torch.from_numpy(tgt)


class Attn(nn.Module):
    """h.i.attn: causal self-attention with q, k, v, then c_proj."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.c_proj = (nn.Linear(d, d) for _ in range(4))
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1),
                             persistent=False)
        self.scale = float(np.float32(1.0 / math.sqrt(d // heads)))

    def forward(self, x):
        b, s, d = x.shape
        dh = d // self.heads
        q, k, v = (m(x).view(b, s, self.heads, dh).transpose(1, 2)
                   for m in (self.q, self.k, self.v))
        scores = (q @ k.transpose(-2, -1)) * self.scale
        ctx = scores.masked_fill(self.mask, float("-inf")).softmax(-1) @ v
        return self.c_proj(ctx.transpose(1, 2).reshape(b, s, d))


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """h.i: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = Attn(d, heads, seq)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = Mlp(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["width"]
        self.wte = nn.Embedding(c["vocab"], d)
        self.wpe = nn.Embedding(1024, d)
        self.h = nn.ModuleList(Block(d, c["heads"], c["seq"]) for _ in range(c["layers"]))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.register_buffer("pos", torch.arange(c["seq"]), persistent=False)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(self.pos)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def read_params(path):
    """{name: float32 array} from a REMATPRM file."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != b"REMATPRM":
        sys.exit("charlm_torch: %s is not a parameter file" % path)
    (count,), at, out = struct.unpack_from("<I", buf, 8), 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", buf, at)
        name = buf[at + 4:at + 4 + n].decode()
        at += 4 + n
        (nd,) = struct.unpack_from("<I", buf, at)
        dims = struct.unpack_from("<%dq" % nd, buf, at + 4)
        at += 4 + 8 * nd
        numel = int(np.prod(dims))
        out[name] = np.frombuffer(buf, "<f4", numel, at).reshape(dims)
        at += 4 * numel
    return out


def load(model, path):
    """Copies every parameter from the file by name; exits on any mismatch."""
    w = read_params(path)
    mine = dict(model.named_parameters())
    if set(w) != set(mine):
        sys.exit("charlm_torch: names differ: %s" % sorted(set(w) ^ set(mine))[:5])
    with torch.no_grad():
        for name, p in mine.items():
            if tuple(p.shape) != w[name].shape:
                sys.exit("charlm_torch: %s: shape %s, file %s" % (name, tuple(p.shape),
                                                                  w[name].shape))
            p.copy_(torch.from_numpy(w[name].copy()))
    return sum(p.numel() for p in mine.values())


def parse(argv):
    c = {"warmup": 1}
    for a in argv:
        k, _, v = a.partition("=")
        c[k] = v if k in ("corpus", "params") else float(v) if k in ("lr", "wd") else int(v)
    return c


def main():
    c = parse(sys.argv[1:])
    torch.set_num_threads(c["threads"])
    torch.manual_seed(0)
    with open(c["corpus"], "rb") as f:
        data = np.frombuffer(f.read(), np.uint8)
    model = Gpt(c)
    print("params %d" % load(model, c["params"]), flush=True)
    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    print("blas %s" % (blas.group(1) if blas else "unknown"), flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=c["wd"])
    times, bhash = [], 0
    for i in range(c["steps"]):
        ids, tgt = batch(data, c["seed"], i, c["batch"], c["seq"])
        bhash += int((ids.reshape(-1) * torch.arange(1, ids.numel() + 1)).sum()) * (i + 1)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(ids, tgt)
        loss.backward()
        opt.step()
        if i >= c["warmup"]:
            times.append(time.perf_counter() - t0)
        print("loss %d %.6f" % (i, loss.item()), flush=True)
    print("batch_hash %d" % bhash)
    print("median_seconds %.6f" % (statistics.median(times) if times else 0.0))


if __name__ == "__main__":
    main()
