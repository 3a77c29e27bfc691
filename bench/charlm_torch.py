#!/usr/bin/python3
"""charlm_torch.py - the PyTorch peer of bench/charlm: the zoo's GPT-2 (src/models/
transformer.c, dropout off) trained in float32 with torch.optim.AdamW from the weights
remat starts from, on the batches remat draws. Run with Debian's PyTorch 1.13
(/usr/bin/python3); bench/charlm runs it and reads what it prints.

Every matrix product runs as a convolution. Debian's PyTorch is built with
BLAS_INFO=generic: nn.Linear, matmul and bmm in float32 go to the reference BLAS, about
6 GFLOP/s on this machine (6.5 s a step of the 4-layer model, 1,200 steps in two hours),
while its float32 convolutions go to oneDNN (USE_MKLDNN=ON) at 60 to 110 GFLOP/s. So a
linear layer x W^T + b is F.conv2d of x seen as (n, in, 1, 1) with W seen as
(out, in, 1, 1) (dense), the tied output layer the same without a bias, and the
attention's batched products q k^T and p v a grouped F.conv1d with one group per
(sequence, head) pair (bmm_nt); about 0.4 s a step. Each is the same function of the same
float32 tensors, gradients included, and the parameters, their initial values, AdamW and
the batches are those of nn.Linear and matmul: only the order of the float32 sums
differs, so results differ by rounding. check=1 measures that on step 0 before training:
the forward and backward once with F.linear and matmul and once as convolutions, same
weights, same batch; it prints the largest relative differences of the loss and of any
gradient (see form_check) and changes no weight.

usage: bench/charlm_torch.py key=value ...
    corpus   the text file remat reads as bytes (vocabulary 256)
    params   remat's initial parameters (remat_trainer_save; docs/formats.md)
    steps, batch, seq, layers, heads, width, vocab
    lr, wd   AdamW's learning rate and weight decay (betas 0.9, 0.999, eps 1e-8)
    seed     the seed of remat_tokens_batch
    threads  torch.set_num_threads
    warmup   steps left out of the median step time (default 1)
    check    1: run the check above first (default 0)
    seconds  stop after the first step that ends this many seconds after training
             began (default 0: no limit)

The batches: step i, sequence b starts at off = h mod (count - seq) with
h = splitmix64(splitmix64(splitmix64(seed) ^ i) ^ b), redrawn as h = splitmix64(h)
while h >= 2^64 - (2^64 mod (count - seq)): remat_tokens_batch's documented scheme
(include/remat.h), recomputed here. The ids of sequence b are bytes off .. off + seq - 1,
its targets the bytes one further.

Prints, one per line: "params N" (scalars loaded), "blas NAME" (torch's BLAS_INFO),
"mkldnn 0|1" (whether its convolutions can run on oneDNN), "form_check L G" (check=1),
"loss STEP VALUE" for every step trained (the loss before that step's update, as
remat_trainer_step_tokens reports it), "stopped N" when the time limit ended training
after N steps, "batch_hash H" (sum over the steps i trained and entries k of
ids[k] * (k + 1) * (i + 1), which bench/charlm computes from remat's batches),
"median_seconds S".
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


# False: F.linear and matmul (the generic BLAS); True: the convolution form (oneDNN).
CONV = True


def dense(x, w, b=None):
    """x @ w.t() + b over x's last dimension; w (out, in)."""
    if not CONV:
        return F.linear(x, w, b)
    y = F.conv2d(x.reshape(-1, x.shape[-1], 1, 1), w[:, :, None, None], b)
    return y.reshape(*x.shape[:-1], w.shape[0])


def bmm_nt(a, b):
    """a @ b.transpose(1, 2) for a (g, m, k), b (g, n, k): (g, m, n).

    As a grouped convolution over m positions: input (1, g k, m), weight (g n, k, 1).
    """
    if not CONV:
        return a @ b.transpose(1, 2)
    g, m, k = a.shape
    n = b.shape[1]
    y = F.conv1d(a.transpose(1, 2).reshape(1, g * k, m), b.reshape(g * n, k, 1), groups=g)
    return y.view(g, n, m).transpose(1, 2)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same initial values) computed by dense."""

    def forward(self, x):
        return dense(x, self.weight, self.bias)


class Attn(nn.Module):
    """h.i.attn: causal self-attention with q, k, v, then c_proj."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.c_proj = (Linear(d, d) for _ in range(4))
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1),
                             persistent=False)
        self.scale = float(np.float32(1.0 / math.sqrt(d // heads)))

    def forward(self, x):
        b, s, d = x.shape
        dh = d // self.heads
        q, k, v = (m(x).view(b, s, self.heads, dh).transpose(1, 2).reshape(-1, s, dh)
                   for m in (self.q, self.k, self.v))
        scores = bmm_nt(q, k).view(b, self.heads, s, s) * self.scale
        p = scores.masked_fill(self.mask, float("-inf")).softmax(-1)
        ctx = bmm_nt(p.view(-1, s, s), v.transpose(1, 2)).view(b, self.heads, s, dh)
        return self.c_proj(ctx.transpose(1, 2).reshape(b, s, d))


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = Linear(d, 4 * d)
        self.c_proj = Linear(4 * d, d)

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
        logits = dense(self.ln_f(x), self.wte.weight)
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


def form_check(model, ids, tgt):
    """The largest relative differences of the loss and of the gradients (each
    max |conv - linear| / max |linear| over a tensor) between the two forms on one batch;
    leaves the weights as they were and no gradient behind. The keys' biases are left
    out: adding one vector to every key adds a constant to a row of scores, which the
    softmax removes, so their gradient is 0 but for rounding (about 1e-9 here) in
    either form, and the ratio of two roundings says nothing."""
    global CONV
    out = []
    for conv in (False, True):
        CONV = conv
        model.zero_grad(set_to_none=True)
        loss = model(ids, tgt)
        loss.backward()
        out.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()
                                  if not n.endswith("attn.k.bias")}))
    model.zero_grad(set_to_none=True)
    CONV = True
    (l0, g0), (l1, g1) = out
    grad = max(float((g1[n] - g0[n]).abs().max() / g0[n].abs().max()) for n in g0)
    return abs(l1 - l0) / abs(l0), grad


KEYS = ("corpus", "params", "steps", "batch", "seq", "layers", "heads", "width", "vocab",
        "lr", "wd", "seed", "threads")


def parse(argv):
    """{key: value} from key=value arguments; exits on an unknown, missing or bad one."""
    c = {"warmup": 1, "check": 0, "seconds": 0.0}
    for a in argv:
        k, _, v = a.partition("=")
        if k not in KEYS and k not in c:
            sys.exit("charlm_torch: unknown argument %r (see the usage at the top)" % a)
        try:
            c[k] = v if k in ("corpus", "params") else \
                float(v) if k in ("lr", "wd", "seconds") else int(v)
        except ValueError:
            sys.exit("charlm_torch: %s: not a number" % a)
    missing = [k for k in KEYS if k not in c]
    if missing:
        sys.exit("charlm_torch: missing %s (see the usage at the top)" % ", ".join(missing))
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
    print("mkldnn %d" % torch.backends.mkldnn.is_available(), flush=True)
    if c["check"]:
        ids, tgt = batch(data, c["seed"], 0, c["batch"], c["seq"])
        print("form_check %.3e %.3e" % form_check(model, ids, tgt), flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=c["wd"])
    times, bhash, began = [], 0, time.perf_counter()
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
        if c["seconds"] > 0 and time.perf_counter() - began > c["seconds"] and \
                i + 1 < c["steps"]:
            print("stopped %d" % (i + 1))
            break
    print("batch_hash %d" % bhash)
    print("median_seconds %.6f" % (statistics.median(times) if times else 0.0))


if __name__ == "__main__":
    main()
