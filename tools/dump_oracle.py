#!/usr/bin/env python3
"""Independent oracle for the graph-dump figures that tests/test_dump.c checks.

Reads a Chainer graph dump (cg_*.txt) and replays the `none` baseline of issue 2 in
plain Python, sharing no code with the C implementation: forward records in file order,
then backward records in reverse file order; every forward value lives from the record
that outputs it until the last forward record or backward record (`input`/`output`
entries) that reads it; every gradient from its first write until the last backward
record that reads it (`gradient` entries); live bytes are measured after each record
before anything is freed. Prints: |V|, 2 M(V), twice every value's bytes, and the peak.

usage: tools/dump_oracle.py cg_resnet50.txt [...]
"""
import sys


def parse(path):
    lines = open(path).read().split('\n')
    n, m = map(int, lines[0].split())
    i = 1
    size = {}
    for _ in range(n):
        vid, nbytes, _name = lines[i].split(' ', 2)
        size[int(vid)] = int(nbytes)
        i += 1
    recs = []
    for _ in range(m):
        kind = lines[i]
        k, p = map(int, lines[i + 1].split())
        i += 2
        ins = [(int(a), b) for a, b in (lines[i + j].split() for j in range(k))]
        i += k
        outs = [int(lines[i + j]) for j in range(p)]
        i += p + 2
        recs.append((kind, ins, outs))
    return size, recs


def replay(path):
    size, recs = parse(path)
    fwd = [r for r in recs if r[0] == 'forward']
    bwd = [r for r in recs if r[0] == 'backward']
    produced = {o for r in fwd for o in r[2]}
    steps = [('F', r) for r in fwd] + [('B', r) for r in reversed(bwd)]
    last_value, last_grad = {}, {}
    for s, (k, r) in enumerate(steps):
        for v, kind in r[1]:
            if k == 'F' or kind in ('input', 'output'):
                last_value[v] = s
            elif kind == 'gradient':
                last_grad[v] = s
    live = peak = 0
    values, grads = set(), set()
    for s, (k, r) in enumerate(steps):
        held = values if k == 'F' else grads
        for o in r[2]:
            if o in produced and o not in held:
                held.add(o)
                live += size[o]
        peak = max(peak, live)
        for v in list(values):
            if last_value.get(v, -1) <= s:
                values.discard(v)
                live -= size[v]
        for v in list(grads):
            if last_grad.get(v, -1) <= s:
                grads.discard(v)
                live -= size[v]
    mv = sum(size[v] for v in produced)
    return len(produced), 2 * mv, 2 * sum(size.values()), peak


if __name__ == '__main__':
    for p in sys.argv[1:]:
        print(p, *replay(p))
