#!/usr/bin/python3
"""Exports a torchvision model to ONNX in training mode and computes PyTorch's reference
loss and parameter gradients for one batch, for tests/test_onnx.c.

usage: /usr/bin/python3 tools/onnx_reference.py MODEL SIZE BATCH OUT_DIR [--seed S] [--opset N]

MODEL is a torchvision classification model (resnet18, resnet50, densenet121,
googlenet, vgg11, mobilenet_v2, mnasnet0_5, shufflenet_v2_x0_5, convnext_tiny, ...)
made with 10 classes (GoogLeNet without its auxiliary classifiers; ConvNeXt with
stochastic_depth_prob 0, which PyTorch 1.13 needs to export it in training mode), or
vit_b_16: torchvision's VisionTransformer with ViT-B/16's layers (patch 16, 12 layers,
12 heads, width 768, MLP 3072) made for the image size SIZE (vit_b_16 itself checks
for 224), its head started as nn.Linear starts (torchvision's zeros would leave every
other gradient 0); SIZE the square input size; BATCH the batch. OUT_DIR receives:

  model.onnx   torch.onnx.export in training mode, opset 15 (or --opset N), no constant
               folding; the model's dropout probabilities are set to 0 first, since remat
               and PyTorch draw different dropout masks (an exported Dropout of ratio 0 is
               the identity);
  data.bin     one batch in remat's REMATDAT format (docs/formats.md): uniform [-1, 1)
               float32 images and labels in [0, 10);
  grads.prm    REMATPRM records: "loss" (1 value), then the gradient of every parameter
               under remat's name (batch norm's weight and bias are <op>.gamma and
               <op>.beta), computed in float64 from the same float32 weights and data
               (softmax cross-entropy, mean over the batch, batch norm in training mode),
               rounded to float32 once.
  grads32.prm  the same computed by PyTorch in float32: how far float32 arithmetic
               itself lands from float64 on this model (the test's yardstick);
  init.prm     the starting parameters under the same names (to check that remat reads
               the ONNX initializers exactly).

With --resnet50-224 the script only writes OUT_DIR/model.onnx: ResNet-50 at 224x224,
1000 classes, batch BATCH (the `remat compare` check against the zoo).

With --masks IN OUT (and the same MODEL SIZE BATCH --seed) it exports nothing and writes
OUT: the float64 loss and gradients as grads.prm, but with every ReLU and ReLU6 taking
its pattern (which elements are cut at 0, passed, cut at 6) and every max pooling its
window winners from IN, the choices remat's own float32 forward made, in call order:
records of an int64 count, an int32 kind, then for kind 0 one byte per element (0 cut
low, 1 passed, 2 cut high), for kind 1 int32 indices h*W + w in the input plane.
Float32 and float64 forwards put a few elements near a kink (or a near-tie) on different
sides, and the backward passes those flips on; with the same choices the two differ
only by rounding (tests/test_onnx.c).
"""
import os
import struct
import sys

import torch
import torchvision

from make_fixtures import write_prm  # remat's REMATPRM parameter format

torch.set_num_threads(2)
torch.use_deterministic_algorithms(True)


def write_data(path, x, y):
    n, c, h, w = x.shape
    with open(path, "wb") as f:
        f.write(b"REMATDAT" + struct.pack("<4q", n, c, h, w))
        f.write(x.to(torch.float32).contiguous().numpy().astype("<f4").tobytes())
        f.write(y.to(torch.int32).numpy().astype("<i4").tobytes())


# Parameters remat names after the op that reads them: <module>.<this>, not PyTorch's
# leaf (a layer scale is a depthwise 1x1 convolution's weight, a class token or position
# table an embedding's, attention's input projection a linear layer's).
RENAMED = {"layer_scale": "weight", "in_proj_weight": "weight", "in_proj_bias": "bias",
           "pos_embedding": "weight"}


def remat_names(model):
    """(remat name, parameter) for every parameter."""
    kinds = {name: type(m) for name, m in model.named_modules()}
    out = []
    for name, p in model.named_parameters():
        mod, _, leaf = name.rpartition(".")
        if mod and issubclass(kinds[mod], torch.nn.modules.batchnorm._BatchNorm):
            leaf = {"weight": "gamma", "bias": "beta"}[leaf]
        elif not mod:
            mod, leaf = leaf, "weight"  # a parameter of the model itself (class_token)
        leaf = RENAMED.get(leaf, leaf)
        out.append((mod + "." + leaf, p))
    return out


VIT_B_16 = dict(patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072)


def make(name, classes, size=224):
    kw = {"num_classes": classes}
    if name == "googlenet":
        kw.update(aux_logits=False, init_weights=True)
    if name.startswith("convnext"):
        kw.update(stochastic_depth_prob=0.0)
    if name == "vit_b_16":
        m = torchvision.models.vision_transformer.VisionTransformer(
            image_size=size, num_classes=classes, **VIT_B_16)
        # torchvision starts the head at zero, which leaves every other gradient 0
        m.heads.head.reset_parameters()
        return m
    return getattr(torchvision.models, name)(**kw)


OPSET = [15]  # --opset N


def export(model, x, path):
    model.train()
    torch.onnx.export(model, x, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=OPSET[0],
                      input_names=["input"], output_names=["logits"])


class _Masked(torch.autograd.Function):
    """y = x where passed, lo where cut low, hi where cut high; dy/dx = the passed mask."""

    @staticmethod
    def forward(ctx, x, mid, low, high, lo, hi):
        ctx.save_for_backward(mid)
        return x * mid + lo * low + hi * high

    @staticmethod
    def backward(ctx, g):
        (mid,) = ctx.saved_tensors
        return g * mid, None, None, None, None, None


def masked_grads(model, x, y, masks_path, out_path):
    with open(masks_path, "rb") as f:
        blob = f.read()
    patterns, at = [], 0
    while at < len(blob):
        n, kind = struct.unpack_from("<qi", blob, at)
        at += 12
        size = n * (4 if kind else 1)
        dtype = torch.int32 if kind else torch.uint8
        patterns.append((kind, torch.frombuffer(bytearray(blob[at:at + size]), dtype=dtype)))
        at += size
    used = [0]
    F = torch.nn.functional
    relu, hardtanh, max_pool2d = F.relu, F.hardtanh, F.max_pool2d

    def next_pattern(kind, numel):
        if used[0] >= len(patterns):
            raise SystemExit("masks: more activations than patterns (%d)" % len(patterns))
        k, p = patterns[used[0]]
        if k != kind or p.numel() != numel:
            raise SystemExit("masks: op %d is kind %d with %d elements, its pattern kind %d "
                             "with %d" % (used[0], kind, numel, k, p.numel()))
        used[0] += 1
        return p.to(torch.int64)

    def take(t, lo, hi):
        p = next_pattern(0, t.numel()).reshape(t.shape)
        return _Masked.apply(t, (p == 1).to(t.dtype), (p == 0).to(t.dtype),
                             (p == 2).to(t.dtype), lo, hi)

    def pool(t, *args, **kw):
        shape = max_pool2d(t.detach(), *args, **kw).shape
        idx = next_pattern(1, shape.numel()).reshape(shape[0], shape[1], -1)
        return t.flatten(2).gather(2, idx).reshape(shape)

    F.relu = lambda t, inplace=False: take(t, 0.0, 0.0)
    F.hardtanh = lambda t, min_val=-1.0, max_val=1.0, inplace=False: take(t, min_val, max_val)
    F.max_pool2d = pool
    try:
        net = model.to(torch.float64).train()
        loss = torch.nn.functional.cross_entropy(net(x.to(torch.float64)), y)
        loss.backward()
    finally:
        F.relu, F.hardtanh, F.max_pool2d = relu, hardtanh, max_pool2d
    if used[0] != len(patterns):
        raise SystemExit("masks: %d patterns, %d activations" % (len(patterns), used[0]))
    grads = [("loss", loss.detach().reshape(1))]
    grads += [(n, p.grad) for n, p in remat_names(net)]
    write_prm(out_path, grads)


def main():
    args, seed, argv, masks = [], 1, sys.argv[1:], None
    while argv:
        a = argv.pop(0)
        if a == "--seed" and argv:
            seed = int(argv.pop(0))
        elif a == "--opset" and argv:
            OPSET[0] = int(argv.pop(0))
        elif a == "--masks" and len(argv) >= 2:
            masks = (argv.pop(0), argv.pop(0))
        elif not a.startswith("--"):
            args.append(a)
    if len(args) != 4:
        sys.exit(__doc__)
    name, size, batch, out = args[0], int(args[1]), int(args[2]), args[3]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)
    if "--resnet50-224" in sys.argv:
        model = make("resnet50", 1000)
        export(model, torch.zeros(batch, 3, 224, 224), os.path.join(out, "model.onnx"))
        return
    model = make(name, 10, size)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    x = torch.rand(batch, 3, size, size) * 2 - 1
    y = torch.randint(0, 10, (batch,))
    if masks:
        masked_grads(model, x, y, masks[0], masks[1])
        return
    named = remat_names(model)
    write_prm(os.path.join(out, "init.prm"), named)
    write_data(os.path.join(out, "data.bin"), x, y)
    # The export runs the model once in training mode, which moves the batch-norm running
    # statistics; the reference starts from the same weights, so it is computed on a copy
    # taken before.
    ref = make(name, 10, size)
    ref.load_state_dict(model.state_dict())
    for m in ref.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    export(model, x, os.path.join(out, "model.onnx"))
    ref32 = make(name, 10, size)
    ref32.load_state_dict(ref.state_dict())
    for m in ref32.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    for net, dtype, fname in ((ref, torch.float64, "grads.prm"),
                              (ref32, torch.float32, "grads32.prm")):
        net = net.to(dtype).train()
        loss = torch.nn.functional.cross_entropy(net(x.to(dtype)), y)
        loss.backward()
        grads = [("loss", loss.detach().reshape(1))]
        grads += [(n, p.grad) for n, p in remat_names(net)]
        write_prm(os.path.join(out, fname), grads)


if __name__ == "__main__":
    main()
