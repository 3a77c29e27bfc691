/*
 * maxtree.c - a segment tree of byte counts with range additions that are never pushed
 * down: a node's add applies to every index under it, and its mx is its add plus the
 * larger of its children's mx, so the largest value under a node is mx plus the adds of
 * its ancestors (carried down as acc). A leaf holds a run of at most MT_LEAF indices,
 * whose values stay in the caller's array (changed there where an addition covers part
 * of the run); its mx is its add plus their largest. Nodes are numbered from 1, children
 * 2x and 2x + 1, over halves [lo, mid) and [mid, hi): leaves hold more than MT_LEAF / 2
 * indices, so there are fewer than 4 (2n / MT_LEAF + 1) nodes.
 */
#include "plan/maxtree.h"

#define MT_LEAF 32

static size_t max2(size_t a, size_t b)
{
    return a > b ? a : b;
}

static size_t nodes(size_t n)
{
    return 4 * (2 * n / MT_LEAF + 1) + 4;
}

/* The largest of v[l .. r-1] (r > l). */
static size_t run_max(const size_t *v, size_t l, size_t r)
{
    size_t m = v[l];

    for (size_t k = l + 1; k < r; k++)
        m = max2(m, v[k]);
    return m;
}

static void build(struct maxtree *t, size_t x, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2;

    t->add[x] = 0;
    if (hi - lo <= MT_LEAF) {
        t->mx[x] = run_max(t->v, lo, hi);
        return;
    }
    build(t, 2 * x, lo, mid);
    build(t, 2 * x + 1, mid, hi);
    t->mx[x] = max2(t->mx[2 * x], t->mx[2 * x + 1]);
}

remat_status maxtree_init(struct maxtree *t, const remat_allocator *a, size_t *v, size_t n)
{
    *t = (struct maxtree){n, v, NULL, NULL, a};
    t->mx = core_calloc(a, nodes(n), sizeof *t->mx);
    t->add = core_calloc(a, nodes(n), sizeof *t->add);
    if (!t->mx || !t->add) {
        maxtree_fini(t);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning the host tier");
    }
    if (n)
        build(t, 1, 0, n);
    return REMAT_OK;
}

void maxtree_fini(struct maxtree *t)
{
    core_free(t->al, t->mx, sizeof *t->mx * nodes(t->n));
    core_free(t->al, t->add, sizeof *t->add * nodes(t->n));
    t->mx = t->add = NULL;
}

/* Adds the adds of node x (and acc, its ancestors') into the values under it. */
static void flush_at(struct maxtree *t, size_t x, size_t lo, size_t hi, size_t acc)
{
    size_t mid = lo + (hi - lo) / 2;

    acc += t->add[x];
    if (hi - lo <= MT_LEAF) {
        for (size_t k = lo; acc && k < hi; k++)
            t->v[k] += acc;
        return;
    }
    flush_at(t, 2 * x, lo, mid, acc);
    flush_at(t, 2 * x + 1, mid, hi, acc);
}

void maxtree_flush(struct maxtree *t)
{
    if (t->n) {
        flush_at(t, 1, 0, t->n, 0);
        build(t, 1, 0, t->n);
    }
}

size_t maxtree_get(const struct maxtree *t, size_t i)
{
    size_t x = 1, lo = 0, hi = t->n, acc = 0;

    while (hi - lo > MT_LEAF) {
        size_t mid = lo + (hi - lo) / 2;

        acc += t->add[x];
        x = 2 * x + (i >= mid);
        lo = i >= mid ? mid : lo;
        hi = i >= mid ? hi : mid;
    }
    return t->v[i] + t->add[x] + acc;
}

static void add_at(struct maxtree *t, size_t x, size_t lo, size_t hi, size_t l, size_t r,
                   size_t d)
{
    size_t mid = lo + (hi - lo) / 2;

    if (r <= lo || hi <= l)
        return;
    if (l <= lo && hi <= r) {
        t->add[x] += d;
        t->mx[x] += d;
        return;
    }
    if (hi - lo <= MT_LEAF) {
        for (size_t k = max2(l, lo); k < r && k < hi; k++)
            t->v[k] += d;
        t->mx[x] = t->add[x] + run_max(t->v, lo, hi);
        return;
    }
    add_at(t, 2 * x, lo, mid, l, r, d);
    add_at(t, 2 * x + 1, mid, hi, l, r, d);
    t->mx[x] = t->add[x] + max2(t->mx[2 * x], t->mx[2 * x + 1]);
}

void maxtree_add(struct maxtree *t, size_t l, size_t r, size_t d)
{
    if (l < r && t->n)
        add_at(t, 1, 0, t->n, l, r, d);
}

static size_t max_at(const struct maxtree *t, size_t x, size_t lo, size_t hi, size_t l,
                     size_t r)
{
    size_t mid = lo + (hi - lo) / 2;

    if (r <= lo || hi <= l)
        return 0;
    if (l <= lo && hi <= r)
        return t->mx[x];
    if (hi - lo <= MT_LEAF)
        return t->add[x] + run_max(t->v, max2(l, lo), r < hi ? r : hi);
    return t->add[x] + max2(max_at(t, 2 * x, lo, mid, l, r), max_at(t, 2 * x + 1, mid, hi, l, r));
}

size_t maxtree_max(const struct maxtree *t, size_t l, size_t r)
{
    return l < r && t->n ? max_at(t, 1, 0, t->n, l, r) : 0;
}

/* The first (last where last) index of [l, r) under node x with a value above thr; acc:
 * the adds of x's ancestors. */
static size_t above_at(const struct maxtree *t, size_t x, size_t lo, size_t hi, size_t l,
                       size_t r, size_t thr, size_t acc, bool last)
{
    size_t mid = lo + (hi - lo) / 2, i;

    if (r <= lo || hi <= l || t->mx[x] + acc <= thr)
        return MAXTREE_NONE;
    acc += t->add[x];
    if (hi - lo <= MT_LEAF) {
        size_t a = max2(l, lo), b = r < hi ? r : hi;

        for (size_t k = 0; k < b - a; k++) {
            i = last ? b - 1 - k : a + k;
            if (t->v[i] + acc > thr)
                return i;
        }
        return MAXTREE_NONE;
    }
    if (last) {
        i = above_at(t, 2 * x + 1, mid, hi, l, r, thr, acc, last);
        return i != MAXTREE_NONE ? i : above_at(t, 2 * x, lo, mid, l, r, thr, acc, last);
    }
    i = above_at(t, 2 * x, lo, mid, l, r, thr, acc, last);
    return i != MAXTREE_NONE ? i : above_at(t, 2 * x + 1, mid, hi, l, r, thr, acc, last);
}
size_t maxtree_first_above(const struct maxtree *t, size_t l, size_t r, size_t thr)
{
    return l < r && t->n ? above_at(t, 1, 0, t->n, l, r, thr, 0, false) : MAXTREE_NONE;
}

size_t maxtree_last_above(const struct maxtree *t, size_t l, size_t r, size_t thr)
{
    return l < r && t->n ? above_at(t, 1, 0, t->n, l, r, thr, 0, true) : MAXTREE_NONE;
}
