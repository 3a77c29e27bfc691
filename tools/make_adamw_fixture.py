#!/usr/bin/python3
"""make_adamw_fixture.py - PyTorch reference data for tests/test_adamw.c.

Run with the Python that has PyTorch: /usr/bin/python3 tools/make_adamw_fixture.py.
It rewrites tests/data/adamw.fix, the same bytes on every run (fixed seed, one thread).

What it records. torch.optim.AdamW (amsgrad and maximize off, foreach off) run on one
float32 parameter tensor for a few steps, each step's gradient set by hand (a fixed
sequence drawn here) instead of coming from a loss. Each case has its own lr, weight
decay, betas and eps; the hyperparameters are rounded to float32 before PyTorch sees
them, because remat's options hold float32 (remat_train_opts), so both sides start from
the same numbers. The arithmetic is PyTorch's own float32 update, which the C test must
match within 1e-6 relative.

The weights are drawn with magnitudes in [0.5, 1.5] (away from 0, where a relative
tolerance means nothing); the gradients are N(0, 1) times 0.1, 1 and 10 at steps 1, 2
and 3 (so the moments see changing scales), with a few
elements set to 0 and a few to 1e-9 (smaller than eps: eps dominates the denominator).
n = 37 elements, not a multiple of a vector width, so that PyTorch runs both its
vectorised loop and its scalar tail.

Format (text, one record per line, fields separated by single spaces; every float is
printed with 9 significant digits, which round-trips a float32 exactly):

    # comment lines start with '#'
    case NAME lr LR wd WD beta1 B1 beta2 B2 eps EPS n N steps K
    w0 X1 .. XN          the weights before the first step
    g T X1 .. XN         the gradient given at step T (1 .. K)
    w T X1 .. XN         the weights after step T

Each case's lines follow its `case` line in that order: w0, then per step g T, w T.
"""
import os

import numpy as np
import torch

N = 37
STEPS = 3
CASES = [
    # name, lr, weight decay, beta1, beta2, eps
    ("defaults", 1e-3, 1e-2, 0.9, 0.999, 1e-8),
    ("custom", 1e-2, 0.1, 0.8, 0.99, 1e-6),
    ("nodecay", 3e-3, 0.0, 0.5, 0.9, 1e-4),
]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "adamw.fix")


def f32(x):
    """x rounded to float32, as a Python float."""
    return float(np.float32(x))


def fmt(a):
    return " ".join("%.9g" % float(v) for v in a)


def run_case(rng, name, lr, wd, b1, b2, eps):
    lr, wd, b1, b2, eps = f32(lr), f32(wd), f32(b1), f32(b2), f32(eps)
    mag = rng.uniform(0.5, 1.5, N)
    sign = np.where(rng.uniform(size=N) < 0.5, -1.0, 1.0)
    w0 = (mag * sign).astype(np.float32)
    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
                            amsgrad=False, maximize=False, foreach=False)
    lines = ["case %s lr %.9g wd %.9g beta1 %.9g beta2 %.9g eps %.9g n %d steps %d"
             % (name, lr, wd, b1, b2, eps, N, STEPS), "w0 " + fmt(w0)]
    for t in range(1, STEPS + 1):
        g = (rng.standard_normal(N) * 10.0 ** (t - 2)).astype(np.float32)
        g[3 * t] = 0.0
        g[3 * t + 1] = 1e-9
        p.grad = torch.from_numpy(g.copy())
        opt.step()
        lines.append("g %d %s" % (t, fmt(g)))
        lines.append("w %d %s" % (t, fmt(p.detach().numpy())))
    return lines


def main():
    torch.set_num_threads(1)
    rng = np.random.RandomState(20261124)
    lines = ["# tests/data/adamw.fix: torch.optim.AdamW on fixed gradients, written by",
             "# tools/make_adamw_fixture.py (its docstring has the format); torch %s"
             % torch.__version__]
    for c in CASES:
        lines += run_case(rng, *c)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (os.path.normpath(OUT), len(CASES)))


if __name__ == "__main__":
    main()
