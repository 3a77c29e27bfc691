#!/usr/bin/python3
"""Exports a recurrent classifier (nn.LSTM or nn.GRU and a linear head) to ONNX in
training mode and computes PyTorch's reference loss and parameter gradients for one
batch, for tests/test_onnx_rnn.c.

usage: /usr/bin/python3 tools/onnx_rnn_reference.py OUT_ROOT MODEL... [--seed S] [--opset N]

each MODEL into OUT_ROOT/MODEL (one run: PyTorch's import dominates), MODEL one of
  lstm      nn.LSTM(8, 16) over 10 steps of a batch of 3, then nn.Linear(16, 5) on the
            last step's output;
  gru       the same with nn.GRU(8, 16);
  lstm_hc   lstm, its head on the sum of the last hidden and cell states (h_n, c_n);
  lstm2     nn.LSTM(8, 16, num_layers=2, batch_first=True): input (3, 10, 8);
  gru2_hn   nn.GRU(8, 16, num_layers=2), its head on the sum of both layers' h_n;
  lstm_bi   nn.LSTM(8, 16, bidirectional=True) and nn.Linear(32, 5) on the first and
            the last step's outputs added (each direction's whole sequence counts);
  gru_bi    the same with nn.GRU;
  gru_fold  gru exported with constant folding: W, R and B are the exporter's own
            initializers in ONNX's layout (gate order z r h), which remat takes as they
            are ("<initializer>.W.weight", .R, and B's halves .Wb and .Rb); their
            reference gradients are PyTorch's, reordered into that layout;
  gru_lbr0  gru_fold with the GRU's linear_before_reset set to 0 in the file (ONNX's
            default, which PyTorch lacks): the reference is ONNX's GRU written out in
            PyTorch ops (checked against nn.GRU with linear_before_reset 1);
  lstm_h0   lstm called with a constant initial state of ones (remat refuses it).
The loss is the mean cross-entropy of the logits (3, 5) against 3 labels.

OUT_ROOT/MODEL receives:
  model.onnx   torch.onnx.export in training mode, opset N (default 13), no constant
               folding (but gru_fold);
  x.bin        the input batch, float32; labels.bin: the 3 labels, int32;
  grads.prm    REMATPRM records: "loss", then every parameter's gradient under remat's
               name, computed in float64 from the float32 weights (rounded once);
  grads32.prm  the same computed by PyTorch in float32 (float32's own error);
  init.prm     the starting parameters under remat's names.
remat's names are PyTorch's, but for the recurrent module's weight_ih_lK, weight_hh_lK,
bias_ih_lK and bias_hh_lK, each of which is the table of its own op: "<name>.weight".
"""
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import write_prm  # noqa: E402  remat's REMATPRM parameter format

torch.set_num_threads(2)
torch.use_deterministic_algorithms(True)
STEPS, BATCH, FEAT, HIDDEN, CLASSES = 10, 3, 8, 16, 5


class Classifier(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        cell = nn.GRU if kind.startswith("gru") else nn.LSTM
        kw = {"lstm2": dict(num_layers=2, batch_first=True), "gru2_hn": dict(num_layers=2),
              "lstm_bi": dict(bidirectional=True), "gru_bi": dict(bidirectional=True)}
        self.rnn = cell(FEAT, HIDDEN, **kw.get(kind, {}))
        self.head = nn.Linear(HIDDEN * (2 if kind.endswith("_bi") else 1), CLASSES)

    def forward(self, x):
        if self.kind == "lstm_h0":
            ones = x.new_ones(1, BATCH, HIDDEN)
            y, hc = self.rnn(x, (ones, ones))
        else:
            y, hc = self.rnn(x)
        if self.kind == "lstm_hc":  # the final states, ONNX's Y_h and Y_c
            return self.head(hc[0][-1] + hc[1][-1])
        if self.kind == "gru2_hn":  # h_n: both layers' Y_h, concatenated
            return self.head(hc[0] + hc[-1])
        if self.kind.endswith("_bi"):
            return self.head(y[0] + y[-1])
        return self.head(y[:, -1] if self.rnn.batch_first else y[-1])


def is_rnn_param(name):
    leaf = name.rsplit(".", 1)[-1]
    return leaf.split("_")[0] in ("weight", "bias") and "_l" in leaf


def folded_names(path):
    """For an export with constant folding: PyTorch's RNN parameter -> (remat's name,
    the permutation of its gate blocks into ONNX's order)."""
    import onnx
    node = [n for n in onnx.load(path).graph.node if n.op_type in ("LSTM", "GRU")][0]
    perm = [1, 0, 2] if node.op_type == "GRU" else [0, 3, 1, 2]  # r z n, i f g o
    w, r, b = node.input[1], node.input[2], node.input[3]
    return {"weight_ih_l0": (w + ".W.weight", perm), "weight_hh_l0": (r + ".R.weight", perm),
            "bias_ih_l0": (b + ".Wb.weight", perm), "bias_hh_l0": (b + ".Rb.weight", perm)}


def renamed(named, folded):
    out = []
    for n, t in named:
        leaf = n.rsplit(".", 1)[-1]
        if folded and leaf in folded:
            name, perm = folded[leaf]
            t = torch.cat([t.chunk(len(perm))[k] for k in perm])
            out.append((name, t))
        else:
            out.append((n + ".weight" if is_rnn_param(n) else n, t))
    return out


def grads(model, x, labels, dtype, folded):
    m = copy.deepcopy(model).to(dtype)
    m.train()
    m.zero_grad()
    loss = F.cross_entropy(m(x.to(dtype)), labels)
    loss.backward()
    out = [("loss", loss.detach().reshape(1))]
    return out + renamed([(n, p.grad) for n, p in m.named_parameters()], folded)


def onnx_gru(x, w, r, wb, rb, lbr):
    """ONNX's GRU written out (gates z r h, linear_before_reset lbr): the last h."""
    (wz, wr, wh), (rz, rr, rh) = w.chunk(3), r.chunk(3)
    (bz, br, bh), (cz, cr, ch) = wb.chunk(3), rb.chunk(3)
    h = x.new_zeros(x.shape[1], r.shape[1])
    for xt in x:
        z = torch.sigmoid(xt @ wz.t() + bz + h @ rz.t() + cz)
        g = torch.sigmoid(xt @ wr.t() + br + h @ rr.t() + cr)
        rec = (g * h) @ rh.t() + ch if lbr == 0 else g * (h @ rh.t() + ch)
        h = (1 - z) * torch.tanh(xt @ wh.t() + bh + rec) + z * h
    return h


def written_grads(model, folded, x, labels, dtype, lbr):
    """grads() of the gru model through onnx_gru, on ONNX's layout (remat's names)."""
    ps = [(n, t.detach().to(dtype).clone().requires_grad_())
          for n, t in renamed(list(model.named_parameters()), folded)]
    p = dict(ps)
    w, r, wb, rb = (p[folded[k][0]] for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                               "bias_hh_l0"))
    h = onnx_gru(x.to(dtype), w, r, wb, rb, lbr)
    loss = F.cross_entropy(h @ p["head.weight"].t() + p["head.bias"], labels)
    loss.backward()
    return [("loss", loss.detach().reshape(1))] + [(n, t.grad) for n, t in ps]


def set_lbr0(path):
    """The exported GRU's linear_before_reset set to 0 (ONNX's default)."""
    import onnx
    m = onnx.load(path)
    node = [n for n in m.graph.node if n.op_type == "GRU"][0]
    for a in node.attribute:
        if a.name == "linear_before_reset":
            a.i = 0
    onnx.save(m, path)


def export(which, out, seed, opset):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)
    model = Classifier(which)
    shape = (BATCH, STEPS, FEAT) if which == "lstm2" else (STEPS, BATCH, FEAT)
    x = torch.randn(shape)
    labels = torch.randint(0, CLASSES, (BATCH,))
    model.train()
    path = os.path.join(out, "model.onnx")
    torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=which in ("gru_fold", "gru_lbr0"),
                      opset_version=opset, input_names=["x"], output_names=["logits"])
    folded = folded_names(path) if which in ("gru_fold", "gru_lbr0") else None
    with open(os.path.join(out, "x.bin"), "wb") as f:
        f.write(x.numpy().astype("<f4").tobytes())
    with open(os.path.join(out, "labels.bin"), "wb") as f:
        f.write(labels.to(torch.int32).numpy().astype("<i4").tobytes())
    ref = [grads(model, x, labels, dt, folded) for dt in (torch.float64, torch.float32)]
    if which == "gru_lbr0":
        # the written-out GRU is PyTorch's with linear_before_reset 1: checked here
        mine = written_grads(model, folded, x, labels, torch.float64, 1)
        for (n, a), (m, b) in zip(ref[0], mine):
            assert n == m and torch.allclose(a, b, rtol=1e-10, atol=1e-12), n
        set_lbr0(path)
        ref = [written_grads(model, folded, x, labels, dt, 0)
               for dt in (torch.float64, torch.float32)]
    write_prm(os.path.join(out, "grads.prm"), ref[0])
    write_prm(os.path.join(out, "grads32.prm"), ref[1])
    write_prm(os.path.join(out, "init.prm"), renamed(list(model.named_parameters()), folded))


def main():
    args = sys.argv[1:]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    opset = int(args[args.index("--opset") + 1]) if "--opset" in args else 13
    pos = [a for i, a in enumerate(args) if not a.startswith("--") and
           (i == 0 or args[i - 1] not in ("--seed", "--opset"))]
    for which in pos[1:]:
        export(which, os.path.join(pos[0], which), seed, opset)


if __name__ == "__main__":
    main()
