#!/usr/bin/python3
"""Writes tests/data/tiny.onnx: a small network exported by PyTorch in training mode
(opset 15): conv-bn-relu, max pool (ceil mode), a residual block (conv-bn-relu-conv-bn,
add, relu), a concat with a 1x1 conv branch, average pool, global average pool,
flatten, dropout and linear, 3 classes, input (2, 3, 12, 12). tests/test_onnx_reader.c
reads it, mutates it (truncations, flipped bytes) and builds broken models from it; the
fuzz target starts from it. Run by `make fixtures`."""
import os

import torch
import torch.nn as nn

torch.manual_seed(7)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(4)
        self.conv3 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(4)
        self.side = nn.Conv2d(4, 2, 1)
        self.avg = nn.AvgPool2d(2)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        y = torch.relu(self.bn2(self.conv2(x)))
        x = torch.relu(self.bn3(self.conv3(y)) + x)
        x = self.avg(torch.cat([x, self.side(x)], 1))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.drop(x))


out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "tiny.onnx")
m = Tiny().train()
torch.onnx.export(m, torch.zeros(2, 3, 12, 12), out, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, opset_version=15, input_names=["input"],
                  output_names=["logits"])
print("wrote", out, os.path.getsize(out), "bytes")
