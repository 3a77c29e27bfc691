#!/usr/bin/python3
"""Writes tests/data/tiny_tf.onnx, the ONNX fuzz target's second seed (tools/run_fuzz.sh):
a small model PyTorch 1.13 exports in training mode at opset 13 whose nodes go through
the reader's constant folding and patterns: int64 token ids (2, 8) into an embedding,
learned positions from torch.arange, the decomposed layer norm, causal attention
(masked_fill of a registered triangle, scaled softmax), an MLP with the tanh GELU and
the erf GELU, Hardswish (HardSigmoid times x), Hardsigmoid, Tanh, a mean over the
sequence and a sum over the width, and a linear head of 5 classes.
usage: /usr/bin/python3 tools/make_onnx_seed_tf.py
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(3)


class Seed(nn.Module):
    def __init__(self, vocab=16, d=8, s=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(s, d)
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.head = nn.Linear(d + s, 5)
        self.register_buffer("mask", torch.tril(torch.ones(s, s)).view(1, s, s))

    def forward(self, ids):
        b, s = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(s))
        q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], dim=2)
        a = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        a = a.masked_fill(self.mask[:, :s, :s] == 0, float("-inf"))
        x = x + F.softmax(a, dim=-1) @ v
        h = self.fc1(x)
        h = F.gelu(h, approximate="tanh") + F.gelu(h)
        h = F.hardswish(h) * F.hardsigmoid(h) + torch.tanh(h)
        x = x + self.fc2(h)
        return self.head(torch.cat([x.mean(1), x.sum(2)], dim=1))


m = Seed().train()
torch.onnx.export(m, torch.randint(0, 16, (2, 8)), "tests/data/tiny_tf.onnx",
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  opset_version=13)
