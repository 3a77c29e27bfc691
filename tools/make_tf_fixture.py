#!/usr/bin/python3
"""make_tf_fixture.py - PyTorch reference gradients of the zoo's transformers, for
tests/test_tf_torch.c.

Run with the Python that has PyTorch: /usr/bin/python3 tools/make_tf_fixture.py.
It rewrites tests/data/tf_grads.fix, the same bytes on every run (fixed seed, one
thread).

What it records. Two models written here in plain PyTorch, mirroring
src/models/transformer.c op for op (with dropout off, remat_zoo_opts.dropout = -1), at a
reduced size:
  gpt2       2 pre-norm blocks, 4 heads, hidden 32, 16 tokens, vocabulary 64, a position
             table of 1024 rows; causal attention, softmax scale 1/sqrt(head_dim), GELU
             in its tanh form, layer-norm eps 1e-5, logits = ln_f(h) @ wte.weight^T.
  bert-base  2 post-norm layers, 4 heads, hidden 32, 16 tokens, vocabulary 64, 512
             positions and 2 token types; bidirectional attention, exact GELU, eps 1e-12;
             the masked-LM head dense -> GELU -> LayerNorm -> h @ word_embeddings^T (no
             decoder bias).
Both take a batch of 2 sequences; the loss is the mean token cross-entropy against
"labels" over the targets that are not -100 (a few are, to check the ignore index).
Query, key and value are three linear layers; parameters are named by their module
paths, as remat names them ("h.0.attn.q.weight", "encoder.layer.1.output.LayerNorm.bias").

Weights are drawn in float32 from torch seed 1234: matrices and embedding tables
N(0, 0.2^2), layer-norm weights 1 + 0.1 N(0, 1), every bias 0.1 N(0, 1) (so that they
matter). PyTorch computes the loss and every gradient in float64 from those float32
values; the eps and softmax scale are float32 too, as remat holds them.

Format (binary, little-endian; str = u32 length then that many bytes, no NUL):
    "REMATTFG", u32 version (1), u32 n_models
    per model:
        str  zoo name ("gpt2", "bert-base")
        i64  batch, layers, heads, hidden, seq_len, vocab
        f64  loss
        u32  n_tokens; per token value in graph order (input_ids, position_ids,
             [token_type_ids,] labels):
                 str name, u32 ndim, i64 dims[ndim], i32 data[numel]
        u32  n_params; per parameter:
                 str name, u32 ndim, i64 dims[ndim], f32 weight[numel], f64 grad[numel]
"""
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

SEED = 1234
CFG = dict(batch=2, layers=2, heads=4, hidden=32, seq_len=16, vocab=64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "tf_grads.fix")


def f32(x):
    """x rounded to float32, as a Python float (remat's attributes are float32)."""
    return float(np.float32(x))


class Attention(nn.Module):
    """Self-attention up to the merged heads (tf_attention); names: q, k, v or query,
    key, value."""

    def __init__(self, d, heads, names, causal):
        super().__init__()
        self.names, self.heads, self.causal = names, heads, causal
        for n in names:
            setattr(self, n, nn.Linear(d, d))

    def forward(self, x):
        b, s, d = x.shape
        dh = d // self.heads
        q, k, v = (getattr(self, n)(x).view(b, s, self.heads, dh).transpose(1, 2)
                   for n in self.names)
        scores = (q @ k.transpose(-2, -1)) * f32(1.0 / math.sqrt(dh))
        if self.causal:
            mask = torch.ones(s, s, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        ctx = scores.softmax(-1) @ v
        return ctx.transpose(1, 2).reshape(b, s, d)


class GptAttn(Attention):
    """h.i.attn: causal attention with q, k, v, then the output projection c_proj."""

    def __init__(self, d, heads):
        super().__init__(d, heads, ("q", "k", "v"), True)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        return self.c_proj(super().forward(x))


class GptMlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GptBlock(nn.Module):
    """h.i: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=f32(1e-5))
        self.attn = GptAttn(d, heads)
        self.ln_2 = nn.LayerNorm(d, eps=f32(1e-5))
        self.mlp = GptMlp(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden"]
        self.wte = nn.Embedding(c["vocab"], d)
        self.wpe = nn.Embedding(1024, d)
        self.h = nn.ModuleList(GptBlock(d, c["heads"]) for _ in range(c["layers"]))
        self.ln_f = nn.LayerNorm(d, eps=f32(1e-5))

    def forward(self, tok):
        x = self.wte(tok["input_ids"]) + self.wpe(tok["position_ids"])
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return token_loss(logits, tok["labels"])


class BertSelfOutput(nn.Module):
    """attention.output / output: dense, then LayerNorm of it plus the residual."""

    def __init__(self, d_in, d):
        super().__init__()
        self.dense = nn.Linear(d_in, d)
        self.LayerNorm = nn.LayerNorm(d, eps=f32(1e-12))

    def forward(self, a, x):
        return self.LayerNorm(self.dense(a) + x)


class BertAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        setattr(self, "self", Attention(d, heads, ("query", "key", "value"), False))
        self.output = BertSelfOutput(d, d)

    def forward(self, x):
        return self.output(getattr(self, "self")(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dense = nn.Linear(d, 4 * d)

    def forward(self, x):
        return F.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attention = BertAttention(d, heads)
        self.intermediate = BertIntermediate(d)
        self.output = BertSelfOutput(4 * d, d)

    def forward(self, x):
        x = self.attention(x)
        return self.output(self.intermediate(x), x)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden"]
        self.word_embeddings = nn.Embedding(c["vocab"], d)
        self.position_embeddings = nn.Embedding(512, d)
        self.token_type_embeddings = nn.Embedding(2, d)
        self.LayerNorm = nn.LayerNorm(d, eps=f32(1e-12))

    def forward(self, tok):
        x = self.word_embeddings(tok["input_ids"]) + \
            self.position_embeddings(tok["position_ids"])
        return self.LayerNorm(x + self.token_type_embeddings(tok["token_type_ids"]))


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c["hidden"], c["heads"])
                                   for _ in range(c["layers"]))

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


class BertTransform(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dense = nn.Linear(d, d)
        self.LayerNorm = nn.LayerNorm(d, eps=f32(1e-12))

    def forward(self, x):
        return self.LayerNorm(F.gelu(self.dense(x)))


class BertPredictions(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.transform = BertTransform(d)


class BertHead(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.predictions = BertPredictions(d)


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.cls = BertHead(c["hidden"])

    def forward(self, tok):
        x = self.encoder(self.embeddings(tok))
        h = self.cls.predictions.transform(x)
        logits = h @ self.embeddings.word_embeddings.weight.t()
        return token_loss(logits, tok["labels"])


def token_loss(logits, labels):
    """Mean cross-entropy over the targets that are not -100 (remat's token_ce)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100)


def init_weights(model, gen):
    """Draws every parameter in float32 (see the docstring) and sets it as float64.
    Returns {name: float32 array}."""
    norms = {id(m.weight) for m in model.modules() if isinstance(m, nn.LayerNorm)}
    w32 = {}
    for name, p in model.named_parameters():
        z = torch.randn(p.shape, generator=gen, dtype=torch.float32)
        if id(p) in norms:
            w = 1 + 0.1 * z
        elif name.endswith(".bias"):
            w = 0.1 * z
        else:
            w = 0.2 * z
        w32[name] = w.numpy().astype(np.float32)
        with torch.no_grad():
            p.copy_(w.double())
    return w32


def make_tokens(gen, c, bert):
    """Token values in graph order, each (batch, seq_len) int32."""
    b, s, v = c["batch"], c["seq_len"], c["vocab"]
    tok = {"input_ids": torch.randint(0, v, (b, s), generator=gen),
           "position_ids": torch.arange(s).repeat(b, 1)}
    if bert:
        tok["token_type_ids"] = torch.randint(0, 2, (b, s), generator=gen)
    labels = torch.randint(0, v, (b, s), generator=gen)
    labels[0, 3] = labels[1, 0] = labels[1, 11] = -100
    tok["labels"] = labels
    return tok


def pack_str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def pack_shape(shape):
    return struct.pack("<I", len(shape)) + struct.pack("<%dq" % len(shape), *shape)


def run_model(name, cls, gen):
    bert = name == "bert-base"
    model = cls(CFG).double()
    w32 = init_weights(model, gen)
    tok = make_tokens(gen, CFG, bert)
    loss = model(tok)
    loss.backward()
    out = pack_str(name)
    out += struct.pack("<6q", *(CFG[k] for k in ("batch", "layers", "heads", "hidden",
                                                    "seq_len", "vocab")))
    out += struct.pack("<d", loss.item())
    out += struct.pack("<I", len(tok))
    for tname, t in tok.items():
        out += pack_str(tname) + pack_shape(t.shape) + t.numpy().astype("<i4").tobytes()
    params = list(model.named_parameters())
    out += struct.pack("<I", len(params))
    for pname, p in params:
        out += pack_str(pname) + pack_shape(p.shape)
        out += w32[pname].astype("<f4").tobytes()
        out += p.grad.numpy().astype("<f8").tobytes()
    print("%-9s loss %.10f, %d parameters (%d scalars)" %
          (name, loss.item(), len(params), sum(p.numel() for _, p in params)))
    return out


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    models = [("gpt2", Gpt2), ("bert-base", Bert)]
    data = b"REMATTFG" + struct.pack("<II", 1, len(models))
    for name, cls in models:
        data += run_model(name, cls, gen)
    with open(OUT, "wb") as f:
        f.write(data)
    print("wrote %s (%d bytes)" % (os.path.normpath(OUT), len(data)))


if __name__ == "__main__":
    main()
