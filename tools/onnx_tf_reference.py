#!/usr/bin/python3
"""Exports a small transformer written in plain PyTorch to ONNX in training mode and
computes PyTorch's reference loss and parameter gradients for one batch of tokens, for
tests/test_onnx_tf.c.

usage: /usr/bin/python3 tools/onnx_tf_reference.py MODEL OUT_DIR [--seed S] [--opset N]

MODEL is
  gpt      a GPT: token embedding (vocab 64, width 32), learned positions (16), 2
           blocks of pre-norm causal self-attention (4 heads; one (D, 3D) projection
           split into q, k, v; q k^T scaled, the upper triangle masked with -inf from
           a registered buffer, softmax, matmul) and a GELU MLP, a final layer norm and
           the output projection tied to the token embedding (x @ wte.weight.t());
  encoder  an embedding (vocab 64, width 64), torch.nn.TransformerEncoder of 2
           layers (4 heads, feed-forward 128, dropout 0, batch_first) and a linear
           head to the 64-token vocabulary;
  parts-*  a linear layer read in parts (tests/test_onnx_tf.c): an embedding (vocab 64,
           width 8), nn.Linear(8, 24) whose output is cut into q, k, v of 8, then
           q * k + v and a linear head (8, 64). parts-split cuts with .split(8, dim=2),
           parts-slices with h[..., :8], h[..., 8:16], h[..., 16:], parts-nobias is
           parts-split without the bias (a MatMul alone), parts-gemm the same on the
           (32, 8) rows (a Gemm, split on dim 1), parts-twin three nn.Linear(8, 8)
           instead (no split: the graph the others should read as). Left whole:
           parts-input splits the embedding (width 24) itself, parts-shared also feeds
           the linear output to a second head nn.Linear(24, 64), parts-unequal splits
           it into 8 and 16 (heads (8, 64) and (16, 64)).
All take token ids (2, 16) int64 and give (2, 16, 64) logits; the loss is the mean
cross-entropy against next-token targets (remat's token_ce).

OUT_DIR receives:
  model.onnx   torch.onnx.export in training mode, opset N (default 14), no constant
               folding;
  tokens.bin   the batch: 32 int32 token ids, then 32 int32 targets;
  grads.prm    REMATPRM records: "loss", then every parameter's gradient under remat's
               name, computed in float64 from the float32 weights (rounded once);
  grads32.prm  the same computed by PyTorch in float32 (float32's own error);
  init.prm     the starting parameters under remat's names.
remat's names are PyTorch's, but for nn.MultiheadAttention's in_proj_weight and
in_proj_bias, which become <module>.weight and <module>.bias.
"""
import copy
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import write_prm  # noqa: E402  remat's REMATPRM parameter format

torch.set_num_threads(2)
torch.use_deterministic_algorithms(True)
VOCAB, SEQ, BATCH = 64, 16, 2


class Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        a = a.masked_fill(self.mask[:, :, :s, :s] == 0, float("-inf"))
        y = (F.softmax(a, dim=-1) @ v).transpose(1, 2).contiguous().view(b, s, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, d=32, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(SEQ, d)
        self.blocks = nn.ModuleList([Block(d, heads, SEQ) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)

    def forward(self, idx):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()


class Encoder(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        layer = nn.TransformerEncoderLayer(d, 4, dim_feedforward=128, dropout=0.0,
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, idx):
        return self.head(self.enc(self.emb(idx)))


class Parts(nn.Module):
    def __init__(self, mode, d=8):
        super().__init__()
        self.mode, self.d = mode, d
        self.emb = nn.Embedding(VOCAB, 3 * d if mode == "input" else d)
        if mode == "twin":
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        elif mode != "input":
            self.lin = nn.Linear(d, 3 * d, bias=mode != "nobias")
        self.head = nn.Linear(d, VOCAB)
        if mode in ("shared", "unequal"):
            self.head2 = nn.Linear(3 * d if mode == "shared" else 2 * d, VOCAB)

    def forward(self, idx):
        d, x = self.d, self.emb(idx)
        if self.mode == "twin":
            q, k, v = self.q(x), self.k(x), self.v(x)
        elif self.mode == "input":
            q, k, v = x.split(d, dim=2)
        elif self.mode == "gemm":
            h = self.lin(x.reshape(BATCH * SEQ, d))
            q, k, v = (t.reshape(BATCH, SEQ, d) for t in h.split(d, dim=1))
        elif self.mode == "slices":
            h = self.lin(x)
            q, k, v = h[..., :d], h[..., d:2 * d], h[..., 2 * d:]
        elif self.mode == "unequal":
            a, b = self.lin(x).split([d, 2 * d], dim=2)
            return self.head(a) + self.head2(b)
        else:  # split, nobias, shared
            h = self.lin(x)
            q, k, v = h.split(d, dim=2)
        y = self.head(q * k + v)
        return y + self.head2(h) if self.mode == "shared" else y


def remat_name(name):
    for leaf in ("in_proj_weight", "in_proj_bias"):
        if name.endswith("." + leaf):
            return name[: -len(leaf)] + leaf[len("in_proj_"):]
    return name


def grads(model, ids, tgt, dtype):
    m = copy.deepcopy(model).to(dtype)
    m.train()
    m.zero_grad()
    logits = m(ids)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1))
    loss.backward()
    out = [("loss", loss.detach().reshape(1))]
    return out + [(remat_name(n), p.grad) for n, p in m.named_parameters()]


def main():
    args = sys.argv[1:]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    opset = int(args[args.index("--opset") + 1]) if "--opset" in args else 14
    which, out = args[0], args[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)
    if which.startswith("parts-"):
        model = Parts(which[len("parts-"):])
    else:
        model = {"gpt": GPT, "encoder": Encoder}[which]()
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    tgt = torch.randint(0, VOCAB, (BATCH, SEQ))
    model.train()
    torch.onnx.export(model, ids, os.path.join(out, "model.onnx"),
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=opset, input_names=["ids"], output_names=["logits"])
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(ids.to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(tgt.to(torch.int32).numpy().astype("<i4").tobytes())
    write_prm(os.path.join(out, "grads.prm"), grads(model, ids, tgt, torch.float64))
    write_prm(os.path.join(out, "grads32.prm"), grads(model, ids, tgt, torch.float32))
    write_prm(os.path.join(out, "init.prm"),
              [(remat_name(n), p) for n, p in model.named_parameters()])


if __name__ == "__main__":
    main()
