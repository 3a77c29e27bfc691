#!/usr/bin/python3
"""make_fixtures.py - PyTorch reference data for tests/test_fixtures_ops.c and tests/test_fixtures_models.c.

Run with the Python that has PyTorch (`make fixtures`, i.e. /usr/bin/python3
tools/make_fixtures.py). It rewrites tests/data/ops.fix, tests/data/models.fix and
tests/data/<model>_init.prm, tests/data/<model>_step.prm, the same bytes on every run
(fixed seeds, deterministic algorithms, one thread).

Numbers. Every input, parameter, upstream gradient and running statistic is drawn in
float32, so that it is exact in the fixture and in remat; PyTorch then computes in
float64 from those values and the results are rounded to float32 once when written.
The reference is thus PyTorch's answer to the float32 problem, not PyTorch's own float32
rounding errors, and whatever differs in the C test is remat's. The models are checked
here for kinks: every ReLU input is at least RELU_MARGIN away from 0 and every max-pool
window's largest value at least POOL_MARGIN above the second, or another seed is tried,
so a float32 forward cannot pick another branch than the float64 one.

Files (all little-endian).

  *.fix, a list of groups of named tensors:
      file   := "REMATFIX" (8 bytes), u32 version = 1, u32 n_groups, group * n_groups
      group  := u32 n_records, record * n_records   (the first record is "name", text)
      record := u32 name_len, name bytes, u32 dtype, u32 ndim, i64 dims[ndim],
                data: prod(dims) elements of dtype
      dtype  := 0 float32 | 1 int32 | 2 text (bytes; ndim 1, dims[0] = its length)

  ops.fix, one group per op case (y = op(inputs, params), L = sum(y * r)):
      name         text, the case
      op           text, remat_op_name() of the op ("conv2d", "max_pool", ...)
      attr.<f>     the remat_attrs field f (int32 scalars, shape (1); eps and momentum
                   float32); fields not given are 0, i.e. remat's defaults
      x0, x1, ...  the data inputs in order (softmax_ce's x1: int32 labels)
      weight, bias the parameters when the op has them (batch norm, layer norm: gamma
                   and beta)
      running_mean, running_var            batch norm: the statistics before
      r            dL/dy (y's shape)
      y            the output
      dx0, ...     dL/dx_i (none for labels)
      dweight, dbias                       dL/dw, dL/db
      running_mean.after, running_var.after batch norm: after the forward (momentum 0.1,
                   unbiased variance)

  models.fix, one group per tiny model (built identically in test_fixtures.c):
      name         text, the model
      input0, ...  the batch, one per graph input in the order the graph adds them
      labels       int32, shared by every softmax_ce of the model
      loss         (1): the loss of the forward in training mode
      grad.<p>     dL/dp for every parameter p (remat names, below)

  <model>_init.prm and <model>_step.prm: remat's parameter file (docs/formats.md, the
  format of remat_trainer_save / remat_trainer_load):
      "REMATPRM", u32 count, count * (u32 name_len, name, u32 ndim, i64 dims[ndim],
      float32 data)
  with the names remat gives parameters: "<op>.weight", "<op>.bias" for convolutions
  and linear layers, "<op>.gamma", "<op>.beta" for batch norm, and the batch-norm
  statistics "<op>.running_mean", "<op>.running_var". _init holds the values before the
  step, _step after one torch.optim.SGD step (lr 0.1, momentum 0.9, weight decay 1e-4)
  on the gradients above, the statistics as the step's forward left them.
"""

import os
import struct
import sys

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 1e-4
BN_MOMENTUM, BN_EPS = 0.1, 1e-5
RELU_MARGIN, POOL_MARGIN = 1e-5, 1e-5

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# ---------------------------------------------------------------- writing

DT_F32, DT_I32, DT_TEXT = 0, 1, 2


def record(name, value):
    """One record: a torch tensor (float -> float32, integer -> int32) or a str."""
    nb = name.encode()
    if isinstance(value, str):
        data = value.encode()
        return struct.pack("<I", len(nb)) + nb + struct.pack("<IIq", DT_TEXT, 1, len(data)) + data
    t = value.detach().cpu().contiguous()
    if t.dim() == 0:
        t = t.reshape(1)
    if t.is_floating_point():
        dt, t = DT_F32, t.to(torch.float32)
    else:
        dt, t = DT_I32, t.to(torch.int32)
    head = struct.pack("<I", len(nb)) + nb + struct.pack("<II", dt, t.dim())
    head += struct.pack("<%dq" % t.dim(), *t.shape)
    return head + t.numpy().astype("<f4" if dt == DT_F32 else "<i4").tobytes()


def write_fix(path, groups):
    """groups: a list of lists of (name, value)."""
    out = [b"REMATFIX", struct.pack("<II", 1, len(groups))]
    for g in groups:
        out.append(struct.pack("<I", len(g)))
        out.extend(record(n, v) for n, v in g)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def write_prm(path, named):
    """named: a list of (remat name, tensor) in remat's REMATPRM format."""
    out = [b"REMATPRM", struct.pack("<I", len(named))]
    for name, t in named:
        t = t.detach().to(torch.float32).contiguous()
        nb = name.encode()
        out.append(struct.pack("<I", len(nb)) + nb + struct.pack("<I", t.dim()))
        out.append(struct.pack("<%dq" % t.dim(), *t.shape))
        out.append(t.numpy().astype("<f4").tobytes())
    with open(path, "wb") as f:
        f.write(b"".join(out))

# ------------------------------------------------------------------ data


def uni(shape, lo=-1.0, hi=1.0):
    """Uniform float32 values in [lo, hi), returned as float64 (exact)."""
    return (torch.rand(shape, dtype=torch.float32) * (hi - lo) + lo).double()


def away(shape, lo=0.1, hi=1.0):
    """Magnitudes in [lo, hi) with a random sign (no value near a ReLU's kink)."""
    sign = torch.randint(0, 2, shape).double() * 2 - 1
    return uni(shape, lo, hi) * sign


def distinct(shape, step=1.0 / 64):
    """A random permutation of a grid `step` apart (max-pool windows without near-ties);
    exact in float32."""
    n = 1
    for s in shape:
        n *= s
    v = (torch.arange(n, dtype=torch.float64) - n // 2) * step
    return v[torch.randperm(n)].reshape(shape)

# ---------------------------------------------------------------- op cases


def op_case(name, op, attrs, inputs, params, fn, bn_stats=None):
    """A group for one op: y = fn(inputs, params) in float64, L = sum(y * r).
    inputs: list of tensors (int32 labels allowed); params: dict weight/bias;
    bn_stats: (running_mean, running_var) updated in place by fn."""
    xs = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ps = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    stats = [s.clone() for s in bn_stats] if bn_stats else None
    y = fn(xs, ps, stats)
    if y.dim() == 0:
        y = y.reshape(1)
    r = uni(tuple(y.shape))
    (y * r).sum().backward()
    g = [("name", name), ("op", op)]
    for k, v in attrs.items():
        if isinstance(v, list):  # an int32 array field (transpose's perm)
            g.append(("attr." + k, torch.tensor(v, dtype=torch.int32)))
            continue
        g.append(("attr." + k, torch.tensor([v], dtype=torch.float32 if isinstance(v, float)
                                            else torch.int32)))
    for i, x in enumerate(inputs):
        g.append(("x%d" % i, x))
    for k, v in params.items():
        g.append((k, v))
    if bn_stats:
        g += [("running_mean", bn_stats[0]), ("running_var", bn_stats[1])]
    g += [("r", r), ("y", y)]
    for i, x in enumerate(xs):
        if x.is_floating_point():
            g.append(("dx%d" % i, x.grad))
    for k, v in ps.items():
        g.append(("d" + k, v.grad))
    if bn_stats:
        g += [("running_mean.after", stats[0]), ("running_var.after", stats[1])]
    return g


def conv_case(name, n, cin, hw, cout, k, s=(1, 1), p=(0, 0), d=(1, 1), groups=1, bias=True):
    x = uni((n, cin) + hw)
    w = uni((cout, cin // groups) + k, -0.5, 0.5)
    params = {"weight": w}
    if bias:
        params["bias"] = uni((cout,), -0.5, 0.5)
    attrs = {"out_channels": cout, "kh": k[0], "kw": k[1], "sh": s[0], "sw": s[1],
             "ph": p[0], "pw": p[1], "dh": d[0], "dw": d[1], "groups": groups, "bias": int(bias)}
    return op_case(name, "conv2d", attrs, [x], params,
                   lambda xs, ps, _: F.conv2d(xs[0], ps["weight"], ps.get("bias"), s, p, d, groups))


def convt_case(name, n, cin, hw, cout, k, s=(1, 1), p=(0, 0), op=(0, 0), d=(1, 1), groups=1,
               bias=True):
    x = uni((n, cin) + hw)
    w = uni((cin, cout // groups) + k, -0.5, 0.5)
    params = {"weight": w}
    if bias:
        params["bias"] = uni((cout,), -0.5, 0.5)
    attrs = {"out_channels": cout, "kh": k[0], "kw": k[1], "sh": s[0], "sw": s[1],
             "ph": p[0], "pw": p[1], "dh": d[0], "dw": d[1], "groups": groups,
             "out_pad_h": op[0], "out_pad_w": op[1], "bias": int(bias)}
    return op_case(name, "conv_transpose2d", attrs, [x], params,
                   lambda xs, ps, _: F.conv_transpose2d(xs[0], ps["weight"], ps.get("bias"), s,
                                                        p, op, groups, d))


def bn_case(name, shape):
    c = shape[1]
    x = uni(shape, -2, 3)
    params = {"weight": uni((c,), 0.5, 1.5), "bias": uni((c,), -0.5, 0.5)}
    stats = (uni((c,), -0.5, 0.5), uni((c,), 0.5, 2.0))
    return op_case(name, "batch_norm", {}, [x], params,
                   lambda xs, ps, st: F.batch_norm(xs[0], st[0], st[1], ps["weight"], ps["bias"],
                                                   True, BN_MOMENTUM, BN_EPS), stats)


def ln_case(name, shape, attrs):
    """nn.LayerNorm over the last axis; eps from attrs (default BN_EPS, 1e-5)."""
    d = shape[-1]
    x = uni(shape, -2, 3)
    params = {"weight": uni((d,), 0.5, 1.5), "bias": uni((d,), -0.5, 0.5)}
    eps = attrs.get("eps", BN_EPS)
    return op_case(name, "layer_norm", attrs, [x], params,
                   lambda xs, ps, _: F.layer_norm(xs[0], (d,), ps["weight"], ps["bias"], eps))


def pool_case(name, kind, shape, k, s, p=(0, 0), ceil=False, cip=False):
    attrs = {"kh": k[0], "kw": k[1], "sh": s[0], "sw": s[1], "ph": p[0], "pw": p[1],
             "ceil_mode": int(ceil)}
    if kind == "max_pool":
        fn = lambda xs, ps, _: F.max_pool2d(xs[0], k, s, p, ceil_mode=ceil)
        x = distinct(shape)
    else:
        attrs["count_include_pad"] = int(cip)
        fn = lambda xs, ps, _: F.avg_pool2d(xs[0], k, s, p, ceil_mode=ceil, count_include_pad=cip)
        x = uni(shape)
    return op_case(name, kind, attrs, [x], {}, fn)


def upsample_case(name, shape, size, ac):
    return op_case(name, "upsample_bilinear", {"out_h": size[0], "out_w": size[1],
                                               "align_corners": int(ac)}, [uni(shape)], {},
                   lambda xs, ps, _: F.interpolate(xs[0], size=size, mode="bilinear",
                                                   align_corners=ac))


def op_cases():
    torch.manual_seed(1)
    c = []
    c.append(conv_case("conv2d k3 p1 bias", 2, 3, (6, 6), 4, (3, 3), p=(1, 1)))
    c.append(conv_case("conv2d k(3,2) s(2,1) p(1,0) d(1,2) g2", 2, 4, (7, 8), 6, (3, 2),
                       s=(2, 1), p=(1, 0), d=(1, 2), groups=2))
    c.append(conv_case("conv2d k3 s2 p2 d2 no bias", 1, 2, (9, 9), 3, (3, 3), s=(2, 2),
                       p=(2, 2), d=(2, 2), bias=False))
    c.append(conv_case("conv2d depthwise k3 p1 g3", 2, 3, (5, 5), 6, (3, 3), p=(1, 1), groups=3))
    c.append(convt_case("conv_t k2 s2 bias", 2, 3, (3, 3), 4, (2, 2), s=(2, 2)))
    c.append(convt_case("conv_t k3 s2 p1 out_pad1 g2", 2, 4, (3, 4), 6, (3, 3), s=(2, 2),
                        p=(1, 1), op=(1, 1), groups=2))
    c.append(convt_case("conv_t k(3,2) s(3,2) p(1,0) out_pad(1,1) d(1,2) no bias", 1, 2, (3, 3), 3,
                        (3, 2), s=(3, 2), p=(1, 0), op=(1, 1), d=(1, 2), bias=False))
    c.append(bn_case("batch_norm 4-d", (3, 4, 3, 3)))
    c.append(bn_case("batch_norm 2-d", (5, 3)))
    c.append(op_case("relu", "relu", {}, [away((2, 3, 4, 4))], {},
                     lambda xs, ps, _: F.relu(xs[0])))
    # inputs of magnitude >= 0.1: never at the bounds -2 and 0.05
    c.append(op_case("clip [-2, 0.05]", "clip", {"clip_min": -2.0, "clip_max": 0.05},
                     [away((2, 3, 4, 4))], {},
                     lambda xs, ps, _: F.hardtanh(xs[0], -2.0, 0.05)))
    c.append(op_case("leaky_relu 0.2", "leaky_relu", {"alpha": 0.2}, [away((2, 3, 4, 4))], {},
                     lambda xs, ps, _: F.leaky_relu(xs[0], 0.2)))
    c.append(op_case("sigmoid", "sigmoid", {}, [uni((2, 3, 4, 4), -4, 4)], {},
                     lambda xs, ps, _: torch.sigmoid(xs[0])))
    c.append(op_case("mul", "mul", {}, [uni((2, 3, 4, 4)), uni((2, 3, 4, 4))], {},
                     lambda xs, ps, _: xs[0] * xs[1]))
    c.append(op_case("mul by (N, C, 1, 1)", "mul", {}, [uni((2, 3, 4, 4)), uni((2, 3, 1, 1))], {},
                     lambda xs, ps, _: xs[0] * xs[1]))
    c.append(op_case("softmax 2-d", "softmax", {}, [uni((4, 7), -3, 3)], {},
                     lambda xs, ps, _: torch.softmax(xs[0], 1)))
    c.append(op_case("softmax 4-d over channels", "softmax", {}, [uni((2, 5, 3, 3), -3, 3)], {},
                     lambda xs, ps, _: torch.softmax(xs[0], 1)))
    c.append(op_case("transpose (0, 2, 3, 1)", "transpose", {"perm": [0, 2, 3, 1]},
                     [uni((2, 3, 4, 5))], {},
                     lambda xs, ps, _: xs[0].permute(0, 2, 3, 1).contiguous()))
    c.append(pool_case("max_pool k3 s2 p1", "max_pool", (2, 2, 7, 7), (3, 3), (2, 2), (1, 1)))
    c.append(pool_case("max_pool k3 s2 ceil", "max_pool", (2, 2, 8, 8), (3, 3), (2, 2), ceil=True))
    c.append(pool_case("max_pool k(2,3) s2 p1 ceil", "max_pool", (1, 3, 7, 9), (2, 3), (2, 2),
                       (1, 1), ceil=True))
    c.append(pool_case("avg_pool k3 s2 p1 include pad", "avg_pool", (2, 2, 7, 7), (3, 3), (2, 2),
                       (1, 1), cip=True))
    c.append(pool_case("avg_pool k3 s2 p1 exclude pad", "avg_pool", (2, 2, 7, 7), (3, 3), (2, 2),
                       (1, 1), cip=False))
    c.append(pool_case("avg_pool k3 s2 p1 ceil exclude pad", "avg_pool", (2, 2, 8, 8), (3, 3),
                       (2, 2), (1, 1), ceil=True, cip=False))
    c.append(pool_case("avg_pool k3 s2 p1 ceil include pad", "avg_pool", (2, 2, 8, 8), (3, 3),
                       (2, 2), (1, 1), ceil=True, cip=True))
    c.append(pool_case("avg_pool k(2,3) s(1,2) p(0,1) ceil", "avg_pool", (1, 2, 5, 8), (2, 3),
                       (1, 2), (0, 1), ceil=True, cip=False))
    c.append(op_case("global_avg_pool", "global_avg_pool", {}, [uni((2, 3, 4, 5))], {},
                     lambda xs, ps, _: F.adaptive_avg_pool2d(xs[0], 1)))
    c.append(op_case("add of 2", "add", {}, [uni((2, 3, 4, 4)), uni((2, 3, 4, 4))], {},
                     lambda xs, ps, _: xs[0] + xs[1]))
    c.append(op_case("add of 3", "add", {}, [uni((2, 2, 3, 3)) for _ in range(3)], {},
                     lambda xs, ps, _: xs[0] + xs[1] + xs[2]))
    c.append(op_case("concat of 3", "concat", {},
                     [uni((2, 1, 3, 3)), uni((2, 2, 3, 3)), uni((2, 3, 3, 3))], {},
                     lambda xs, ps, _: torch.cat(xs, 1)))
    c.append(op_case("concat 2-d", "concat", {}, [uni((3, 2)), uni((3, 4))], {},
                     lambda xs, ps, _: torch.cat(xs, 1)))
    c.append(op_case("linear bias", "linear", {"out_channels": 5, "bias": 1}, [uni((4, 6))],
                     {"weight": uni((5, 6), -0.5, 0.5), "bias": uni((5,), -0.5, 0.5)},
                     lambda xs, ps, _: F.linear(xs[0], ps["weight"], ps["bias"])))
    c.append(op_case("linear no bias", "linear", {"out_channels": 2}, [uni((3, 7))],
                     {"weight": uni((2, 7), -0.5, 0.5)},
                     lambda xs, ps, _: F.linear(xs[0], ps["weight"])))
    c.append(op_case("flatten", "flatten", {}, [uni((2, 3, 2, 2))], {},
                     lambda xs, ps, _: torch.flatten(xs[0], 1)))
    c.append(upsample_case("upsample 3x5->7x4", (1, 2, 3, 5), (7, 4), False))
    c.append(upsample_case("upsample 3x5->7x4 align_corners", (1, 2, 3, 5), (7, 4), True))
    c.append(upsample_case("upsample 4x4->8x8", (2, 2, 4, 4), (8, 8), False))
    c.append(upsample_case("upsample 5x3->2x6 align_corners", (1, 2, 5, 3), (2, 6), True))
    c.append(op_case("crop 3x4 at (1,2)", "crop",
                     {"out_h": 3, "out_w": 4, "offset_h": 1, "offset_w": 2}, [uni((2, 2, 5, 6))],
                     {}, lambda xs, ps, _: xs[0][:, :, 1:4, 2:6]))
    c.append(op_case("crop 4x5 centred", "crop",
                     {"out_h": 4, "out_w": 5, "offset_h": -1, "offset_w": -1}, [uni((2, 2, 7, 8))],
                     {}, lambda xs, ps, _: xs[0][:, :, 1:5, 1:6]))
    c.append(op_case("pad t1 b2 l0 r3", "pad", {"pad_t": 1, "pad_b": 2, "pad_l": 0, "pad_r": 3},
                     [uni((2, 2, 3, 3))], {}, lambda xs, ps, _: F.pad(xs[0], (0, 3, 1, 2))))
    c.append(op_case("softmax_ce", "softmax_ce", {},
                     [uni((5, 4), -2, 2), torch.randint(0, 4, (5,), dtype=torch.int32)], {},
                     lambda xs, ps, _: F.cross_entropy(xs[0], xs[1].long()).reshape(1)))
    c.append(op_case("sum_losses of 3", "sum_losses", {}, [uni((1,)) for _ in range(3)], {},
                     lambda xs, ps, _: xs[0] + xs[1] + xs[2]))
    # appended last, so that the cases above keep their random draws (and bytes)
    c.append(ln_case("layer_norm 2-d", (4, 6), {}))
    c.append(ln_case("layer_norm 3-d eps 0.1", (2, 3, 5), {"eps": 0.1}))
    c.append(ln_case("layer_norm 4-d", (2, 2, 3, 4), {}))
    c.append(op_case("gelu", "gelu", {}, [uni((2, 3, 4, 4), -4, 4)], {},
                     lambda xs, ps, _: F.gelu(xs[0])))
    c.append(op_case("gelu tanh", "gelu", {"approximate": 1}, [uni((2, 3, 4, 4), -4, 4)], {},
                     lambda xs, ps, _: F.gelu(xs[0], approximate="tanh")))
    t = lambda x: x.transpose(-2, -1)
    c.append(op_case("matmul batched", "matmul", {}, [uni((2, 3, 4)), uni((2, 4, 5))], {},
                     lambda xs, ps, _: torch.matmul(xs[0], xs[1])))
    c.append(op_case("matmul scores Q K^T", "matmul", {"trans_b": 1},
                     [uni((2, 2, 5, 4)), uni((2, 2, 5, 4))], {},
                     lambda xs, ps, _: torch.matmul(xs[0], t(xs[1]))))
    c.append(op_case("matmul A^T by a shared B", "matmul", {"trans_a": 1},
                     [uni((3, 4, 2)), uni((4, 6))], {},
                     lambda xs, ps, _: torch.matmul(t(xs[0]), xs[1])))

    def causal_softmax(x):
        m, n = x.shape[-2], x.shape[-1]
        upper = torch.triu(torch.ones(m, n, dtype=torch.bool), 1)
        return x.masked_fill(upper, float("-inf")).softmax(-1)
    c.append(op_case("softmax_last", "softmax_last", {}, [uni((2, 3, 6), -3, 3)], {},
                     lambda xs, ps, _: xs[0].softmax(-1)))
    c.append(op_case("softmax_last causal", "softmax_last", {"causal": 1},
                     [uni((2, 2, 4, 4), -3, 3)], {}, lambda xs, ps, _: causal_softmax(xs[0])))
    c.append(op_case("softmax_last causal 3x5", "softmax_last", {"causal": 1},
                     [uni((2, 3, 5), -3, 3)], {}, lambda xs, ps, _: causal_softmax(xs[0])))
    c.append(op_case("embedding", "embedding", {"vocab": 7, "out_channels": 3},
                     [torch.tensor([[1, 0, 6, 1], [3, 3, 2, 5]], dtype=torch.int32)],
                     {"weight": uni((7, 3))},
                     lambda xs, ps, _: F.embedding(xs[0].long(), ps["weight"])))
    c.append(op_case("token_ce, one target ignored each", "token_ce", {},
                     [uni((2, 3, 5), -2, 2),
                      torch.tensor([[1, -1, 4], [0, 2, -1]], dtype=torch.int32)], {},
                     lambda xs, ps, _: F.cross_entropy(xs[0].reshape(-1, 5),
                                                       xs[1].reshape(-1).long(),
                                                       ignore_index=-1).reshape(1)))
    c.append(op_case("tanh", "tanh", {}, [uni((2, 3, 4, 4), -3, 3)], {},
                     lambda xs, ps, _: torch.tanh(xs[0])))
    c.append(op_case("hard_sigmoid", "hard_sigmoid", {}, [uni((2, 3, 4, 4), -5, 5)], {},
                     lambda xs, ps, _: F.hardsigmoid(xs[0])))
    c.append(op_case("hard_sigmoid 0.5 x + 0.6", "hard_sigmoid", {"alpha": 0.5, "beta": 0.6},
                     [uni((2, 3, 4, 4), -3, 3)], {},
                     lambda xs, ps, _: (0.5 * xs[0] + 0.6).clamp(0, 1)))
    c.append(op_case("hard_swish", "hard_swish", {}, [uni((2, 3, 4, 4), -5, 5)], {},
                     lambda xs, ps, _: F.hardswish(xs[0])))
    c.append(op_case("reduce_sum axes 1, 3 scaled", "reduce_sum",
                     {"ndim": 4, "shape": [2, 1, 4, 1], "scale": 0.25}, [uni((2, 3, 4, 5))], {},
                     lambda xs, ps, _: xs[0].sum((1, 3), keepdim=True) * 0.25))
    return c

# ------------------------------------------------------------------ models


class Net:
    """A functional model: parameters and batch-norm statistics by remat name, and the
    ops used by the forward, which record the ReLU and max-pool margins."""

    def __init__(self):
        self.p, self.stats, self.margins = {}, {}, []

    def conv(self, name, cin, cout, k, bias=True, transposed=False, groups=1):
        shape = (cin, cout // groups, k, k) if transposed else (cout, cin // groups, k, k)
        fan_in = shape[1] * k * k
        bound = fan_in ** -0.5
        self.p[name + ".weight"] = uni(shape, -bound, bound)
        if bias:
            self.p[name + ".bias"] = uni((cout,), -bound, bound)

    def linear(self, name, fin, fout, bias=True):
        bound = fin ** -0.5
        self.p[name + ".weight"] = uni((fout, fin), -bound, bound)
        if bias:
            self.p[name + ".bias"] = uni((fout,), -bound, bound)

    def bn(self, name, c):
        self.p[name + ".gamma"] = uni((c,), 0.5, 1.5)
        self.p[name + ".beta"] = uni((c,), -0.5, 0.5)
        self.stats[name + ".running_mean"] = uni((c,), -0.2, 0.2)
        self.stats[name + ".running_var"] = uni((c,), 0.5, 2.0)

    # forward helpers
    def b(self, name):
        return self.p.get(name + ".bias")

    def bnf(self, name, x):
        return F.batch_norm(x, self.stats[name + ".running_mean"], self.stats[name + ".running_var"],
                            self.p[name + ".gamma"], self.p[name + ".beta"], True, BN_MOMENTUM,
                            BN_EPS)

    def relu(self, x):
        self.margins.append(("relu", x.detach().abs().min().item()))
        return F.relu(x)

    def maxpool(self, x, k, s, p=0, ceil=False):
        # the gap between the largest value of every window and the next smaller one
        xd = x.detach()
        y = F.max_pool2d(xd, k, s, p, ceil_mode=ceil)
        xp = F.pad(xd, (p, p + k, p, p + k), value=float("-inf"))
        n, c = xd.shape[:2]
        cols = F.unfold(xp.reshape(n * c, 1, *xp.shape[2:]), k, stride=s)
        lh = (xp.shape[2] - k) // s + 1
        lw = (xp.shape[3] - k) // s + 1
        cols = cols.reshape(n * c, k * k, lh, lw)[:, :, :y.shape[2], :y.shape[3]]
        # exact ties (copies of one value: ReLU zeros, overlapping max-pool windows) are
        # ties in any precision, and both sides pick the first; near-ties are not
        top = cols.max(1, keepdim=True).values
        rest = cols.masked_fill(cols == top, float("-inf")).max(1, keepdim=True).values
        gap = (top - rest).min().item()
        self.margins.append(("max_pool", gap))
        return F.max_pool2d(x, k, s, p, ceil_mode=ceil)


def resnet():
    """conv-bn-relu-maxpool-conv-bn + residual add-relu-global avg pool-flatten-linear-ce."""
    m = Net()
    m.conv("conv1", 3, 8, 3, bias=False)
    m.bn("bn1", 8)
    m.conv("conv2", 8, 8, 3, bias=True)
    m.bn("bn2", 8)
    m.linear("fc", 8, 5)
    inputs = [uni((4, 3, 8, 8))]
    labels = torch.randint(0, 5, (4,), dtype=torch.int32)

    def fwd(x):
        h = m.relu(m.bnf("bn1", F.conv2d(x[0], m.p["conv1.weight"], None, 1, 1)))
        h = m.maxpool(h, 2, 2)
        r = m.bnf("bn2", F.conv2d(h, m.p["conv2.weight"], m.b("conv2"), 1, 1))
        h = m.relu(r + h)
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        return F.cross_entropy(F.linear(h, m.p["fc.weight"], m.b("fc")), labels.long())
    return m, inputs, labels, fwd


def inception():
    """A stem, then 1x1 / 1x1-3x3 / avgpool(exclude pad)-1x1 / maxpool branches
    concatenated, max pool with ceil_mode, bn-relu, global pool, linear, ce."""
    m = Net()
    m.conv("stem", 4, 6, 3)
    m.conv("b1", 6, 4, 1)
    m.conv("b2a", 6, 3, 1)
    m.conv("b2b", 3, 4, 3)
    m.conv("b3", 6, 3, 1)
    m.bn("bn", 17)
    m.linear("fc", 17, 4)
    inputs = [uni((2, 4, 10, 10))]
    labels = torch.randint(0, 4, (2,), dtype=torch.int32)

    def fwd(x):
        P = m.p
        s = m.relu(F.conv2d(x[0], P["stem.weight"], m.b("stem"), 1, 1))
        b1 = m.relu(F.conv2d(s, P["b1.weight"], m.b("b1")))
        b2 = m.relu(F.conv2d(s, P["b2a.weight"], m.b("b2a")))
        b2 = m.relu(F.conv2d(b2, P["b2b.weight"], m.b("b2b"), 1, 1))
        b3 = F.avg_pool2d(s, 3, 1, 1, count_include_pad=False)
        b3 = F.conv2d(b3, P["b3.weight"], m.b("b3"))
        b4 = m.maxpool(s, 3, 1, 1)
        h = torch.cat([b1, b2, b3, b4], 1)
        h = m.maxpool(h, 3, 2, 0, ceil=True)
        h = m.relu(m.bnf("bn", h))
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        return F.cross_entropy(F.linear(h, P["fc.weight"], m.b("fc")), labels.long())
    return m, inputs, labels, fwd


def unet():
    """A U-Net piece: conv-bn-relu, max pool, conv-relu, conv_transpose up, centre crop
    of the skip, concat, conv-relu, pad, bilinear upsample, 1x1 conv, bilinear upsample
    with align_corners, global pool, linear, ce."""
    m = Net()
    m.conv("enc1", 3, 4, 3)
    m.bn("enc1_bn", 4)
    m.conv("enc2", 4, 8, 3)
    m.conv("up", 8, 4, 2, transposed=True)
    m.conv("dec", 8, 4, 3)
    m.conv("head", 4, 3, 1)
    m.linear("fc", 3, 3)
    inputs = [uni((2, 3, 12, 12))]
    labels = torch.randint(0, 3, (2,), dtype=torch.int32)

    def fwd(x):
        P = m.p
        e1 = m.relu(m.bnf("enc1_bn", F.conv2d(x[0], P["enc1.weight"], m.b("enc1"))))  # 10x10
        h = m.maxpool(e1, 2, 2)                                                        # 5x5
        h = m.relu(F.conv2d(h, P["enc2.weight"], m.b("enc2")))                         # 3x3
        h = F.conv_transpose2d(h, P["up.weight"], m.b("up"), 2)                        # 6x6
        h = torch.cat([h, e1[:, :, 2:8, 2:8]], 1)                                      # 8 ch
        h = m.relu(F.conv2d(h, P["dec.weight"], m.b("dec")))                           # 4x4
        h = F.pad(h, (2, 1, 1, 0))                                                     # 5x7
        h = F.interpolate(h, size=(9, 11), mode="bilinear", align_corners=False)
        h = F.conv2d(h, P["head.weight"], m.b("head"))
        h = F.interpolate(h, size=(6, 6), mode="bilinear", align_corners=True)
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        return F.cross_entropy(F.linear(h, P["fc.weight"], m.b("fc")), labels.long())
    return m, inputs, labels, fwd


def twohead():
    """Two inputs added after a conv each; head 1: global pool, linear, ce over 4
    classes; head 2: avg pool, flatten, linear, 2-d bn, relu, linear, ce over 3 classes;
    the two losses summed. The labels (in [0, 3)) serve both heads."""
    m = Net()
    m.conv("ca", 3, 4, 3, bias=False)
    m.bn("ca_bn", 4)
    m.conv("cb", 2, 4, 1)
    m.linear("h1fc", 4, 4)
    m.linear("h2fc", 36, 6, bias=False)
    m.bn("h2bn", 6)
    m.linear("h2out", 6, 3)
    inputs = [uni((3, 3, 6, 6)), uni((3, 2, 6, 6))]
    labels = torch.randint(0, 3, (3,), dtype=torch.int32)

    def fwd(x):
        P = m.p
        a = m.relu(m.bnf("ca_bn", F.conv2d(x[0], P["ca.weight"], None, 1, 1)))
        h = a + F.conv2d(x[1], P["cb.weight"], m.b("cb"))
        h1 = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        l1 = F.cross_entropy(F.linear(h1, P["h1fc.weight"], m.b("h1fc")), labels.long())
        h2 = torch.flatten(F.avg_pool2d(h, 2, 2), 1)
        h2 = m.relu(m.bnf("h2bn", F.linear(h2, P["h2fc.weight"])))
        l2 = F.cross_entropy(F.linear(h2, P["h2out.weight"], m.b("h2out")), labels.long())
        return l1 + l2
    return m, inputs, labels, fwd


MODELS = [("resnet", resnet), ("inception", inception), ("unet", unet), ("twohead", twohead)]


def model_fixture(name, build, seed):
    """Draws the model under seeds seed, seed + 1, ... until no ReLU input or max-pool
    runner-up is within the margins; returns the group and writes the .prm files."""
    for attempt in range(100):
        torch.manual_seed(seed + attempt)
        m, inputs, labels, fwd = build()
        init_p = {k: v.clone() for k, v in m.p.items()}
        init_s = {k: v.clone() for k, v in m.stats.items()}
        for v in m.p.values():
            v.requires_grad_(True)
        loss = fwd(inputs)
        bad = [(k, g) for k, g in m.margins
               if g < (RELU_MARGIN if k == "relu" else POOL_MARGIN)]
        if not bad:
            break
        print("  %s: seed %d has a kink within the margin (%s %.2g), next seed"
              % (name, seed + attempt, bad[0][0], bad[0][1]), file=sys.stderr)
    else:
        raise SystemExit("%s: no seed without near-kinks" % name)
    loss.backward()
    grads = {k: v.grad.clone() for k, v in m.p.items()}
    opt = torch.optim.SGD(list(m.p.values()), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    opt.step()
    write_prm(os.path.join(OUT_DIR, name + "_init.prm"),
              list(init_p.items()) + list(init_s.items()))
    write_prm(os.path.join(OUT_DIR, name + "_step.prm"),
              list(m.p.items()) + list(m.stats.items()))
    g = [("name", name)]
    g += [("input%d" % i, x) for i, x in enumerate(inputs)]
    g += [("labels", labels), ("loss", loss.detach().reshape(1))]
    g += [("grad." + k, v) for k, v in grads.items()]
    print("  %s: seed %d, loss %.6f, %d parameters, smallest margin %.3g"
          % (name, seed + attempt, loss.item(), sum(v.numel() for v in grads.values()),
             min(g_ for _, g_ in m.margins)))
    return g


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    cases = op_cases()
    write_fix(os.path.join(OUT_DIR, "ops.fix"), cases)
    print("ops.fix: %d op cases" % len(cases))
    groups = [model_fixture(n, b, 100 * (i + 1)) for i, (n, b) in enumerate(MODELS)]
    write_fix(os.path.join(OUT_DIR, "models.fix"), groups)
    total = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR))
    print("models.fix: %d models; tests/data holds %d bytes" % (len(groups), total))


if __name__ == "__main__":
    main()
