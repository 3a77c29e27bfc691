/*
 * pack_search.c - the packer's search, which pack.c runs when no greedy pass meets the
 * bound: a depth-first search for offsets within cap, after MiniMalloc (Moffitt, ASPLOS
 * 2023). Instances are placed in increasing order of offset (ties by pidx), each at its
 * minoff; a node's candidates are the instances whose minoff is below every unplaced
 * instance's minoff + size (placing one higher would leave a gap another fits in),
 * lowest first; a placement at x is kept when every rank r can still hold its unplaced
 * bytes: max(x, lowest minoff live at r) + tot[r] <= cap.
 */
#include "mem/pack_pk.h"

#include <string.h>

/* Logs word i (i < n: minoff[i], else own[i - n]) before it changes; false when out of
 * memory. */
static bool sr_log(struct pk *p, size_t i)
{
    if (p->n_undo == p->cap_undo) {
        size_t c = p->cap_undo ? 2 * p->cap_undo : 4096;
        struct span *u = core_realloc(p->al, p->undo, p->cap_undo * sizeof *u, c * sizeof *u);

        if (!u)
            return !(p->oom = true);
        p->undo = u;
        p->cap_undo = c;
    }
    p->undo[p->n_undo++] = (struct span){i, i < p->n ? p->minoff[i] : p->own[i - p->n]};
    return true;
}

/* Marks the tree nodes listing instance i whose lowest minoff may have been old. */
static void sr_dirty(struct pk *p, size_t i, size_t old)
{
    p->work += 32;
    FOR_COVER(p, p->lo[i], p->hi[i], v, if (p->own[v] == old && p->stamp[v] < p->n_nodes) {
        p->stamp[v] = p->n_nodes;
        p->dirty[p->n_dirty++] = v;
    });
}

/* Adds d (modulo 2^64: minus a size as its complement) to the unplaced bytes of b's
 * ranks, in tot and in the max tree mt (ad: what was added to a whole subtree). */
static void sr_add(struct pk *p, size_t b, size_t d)
{
    size_t l = p->lo[b] + p->ns, r = p->hi[b] + p->ns, l0 = l >> 1, r0 = (r - 1) >> 1;

    for (size_t k = p->lo[b]; k < p->hi[b]; k++)
        p->tot[k] += d;
    p->work += p->hi[b] - p->lo[b] + 64;
    for (; l < r; l >>= 1, r >>= 1) {
        if (l & 1) {
            p->mt[l] += d;
            p->ad[l++] += d;
        }
        if (r & 1) {
            p->mt[--r] += d;
            p->ad[r] += d;
        }
    }
    for (; l0; l0 >>= 1, r0 >>= 1)
        for (size_t v = l0, k = 0; k < 2; v = r0, k++)
            p->mt[v] = (p->mt[2 * v] > p->mt[2 * v + 1] ? p->mt[2 * v] : p->mt[2 * v + 1]) + p->ad[v];
}

/* Places b at its minoff, raising the minoff of the unplaced instances overlapping it
 * and the lowest minoff of the tree nodes listing them; false when out of memory. */
static bool sr_place(struct pk *p, size_t b)
{
    size_t h = p->minoff[b] + p->size[b], j, n_dirty;
    bool ok = true;

    p->n_nodes += 2;
    p->n_dirty = 0;
    p->off[b] = p->minoff[b];
    sr_dirty(p, b, p->minoff[b]);
    sr_add(p, b, -p->size[b]);
    FOR_OVERLAP(p, b, j, if (p->off[j] == NONE && p->minoff[j] < h && (ok = ok && sr_log(p, j))) {
        sr_dirty(p, j, p->minoff[j]);
        p->minoff[j] = h;
    });
    n_dirty = p->n_dirty;
    p->n_dirty = 0;
    for (size_t d = 0; d < n_dirty && ok; d++) { /* the lowest minoff again; keep changes */
        size_t v = p->dirty[d], t = NONE;

        for (size_t k = p->sat[v]; k < p->sat[v + 1]; k++)
            if (p->off[j = p->seg[k]] == NONE && p->minoff[j] < t)
                t = p->minoff[j];
        p->work += p->sat[v + 1] - p->sat[v];
        if (t != p->own[v] && (ok = sr_log(p, p->n + v))) {
            p->own[v] = t;
            p->stamp[v] = p->n_nodes + 1;
            p->dirty[p->n_dirty++] = v;
        }
    }
    return ok;
}

static void sr_unplace(struct pk *p, size_t b, size_t mark)
{
    p->work += p->n_undo - mark;
    while (p->n_undo > mark) {
        struct span u = p->undo[--p->n_undo];

        *(u.lo < p->n ? &p->minoff[u.lo] : &p->own[u.lo - p->n]) = u.hi;
    }
    sr_add(p, b, p->size[b]);
    p->off[b] = NONE;
}

/* True when every rank can still hold its unplaced bytes, the last placed at x: x plus
 * the most unplaced bytes at a rank (the tree mt), and at the ranks below the tree nodes
 * whose lowest minoff rose, that minoff plus the rank's unplaced bytes (elsewhere
 * neither grew since the parent's check). */
static bool sr_check(struct pk *p, size_t x, size_t cap)
{
    if (x + p->mt[1] > cap)
        return false;
    for (size_t d = 0; d < p->n_dirty; d++) {
        size_t v = p->dirty[d], pm = NONE, a = v, z = v + 1, u;

        for (u = v >> 1; u && p->stamp[u] != p->n_nodes + 1; u >>= 1)
            pm = p->own[u] < pm ? p->own[u] : pm;
        if (u)
            continue; /* below another that rose: checked with it */
        p->tag[v] = p->own[v] < pm ? p->own[v] : pm;
        for (; a < p->ns; a <<= 1, z <<= 1)
            for (u = 2 * a; u < 2 * z; u++)
                p->tag[u] = p->own[u] < p->tag[u >> 1] ? p->own[u] : p->tag[u >> 1];
        p->work += 2 * (z - a);
        for (u = a; u < z && u - p->ns < p->nu; u++)
            if (p->tot[u - p->ns] && p->tag[u] + p->tot[u - p->ns] > cap)
                return false;
    }
    return true;
}

/* The next candidate of node f after (lo, lp) by (minoff, pidx), NONE when no more:
 * an unplaced instance placed at its minoff o in [x, mh) (placing one higher would leave
 * a gap another fits in), not below the parent in (offset, pidx) and ending within cap.
 * Recomputed on each try, as the state is the node's again and a node tries few. */
static size_t sr_next(struct pk *p, struct frame *f, size_t cap)
{
    size_t best = NONE, bo = NONE, bp = NONE;

    for (size_t i = 0; i < p->n && !f->tried; i++) /* mh, on the first try */
        if (p->off[i] == NONE && p->minoff[i] + p->size[i] < f->mh)
            f->mh = p->minoff[i] + p->size[i];
    for (size_t i = 0; i < p->n; i++) {
        size_t o = p->minoff[i], q = p->pidx[i];

        if (p->off[i] != NONE || o >= f->mh || o + p->size[i] > cap || o < f->x ||
            (o == f->x && q < f->pl) || (f->tried && (o < f->lo || (o == f->lo && q <= f->lp))))
            continue;
        if (o < bo || (o == bo && q < bp)) {
            best = i;
            bo = o;
            bp = q;
        }
    }
    p->work += 2 * p->n;
    f->lo = bo;
    f->lp = bp;
    f->tried = true;
    return best;
}

/* Resets the search: nothing placed but the empty instances. */
static void sr_reset(struct pk *p)
{
    for (size_t i = 0; i < p->n; i++) {
        p->off[i] = p->size[i] ? NONE : 0;
        p->minoff[i] = 0;
    }
    for (size_t r = 0; r < p->nu; r++)
        p->tot[r] = p->load[p->ns + r];
    for (size_t v = 0; v < 2 * p->ns; v++) {
        p->own[v] = p->sat[v + 1] > p->sat[v] ? 0 : NONE;
        p->mt[v] = p->load[v];
        p->ad[v] = 0;
    }
    p->n_undo = 0;
}

/* One search for offsets within cap, at most `nodes` placements tried: true when found
 * (the offsets in off). */
static bool sr_run(struct pk *p, size_t cap, size_t nodes, size_t work)
{
    size_t d = 0, b;

    sr_reset(p);
    p->fr[0] = (struct frame){0, 0, NONE, 0, 0, NONE, 0, false};
    for (;;) {
        struct frame *f = &p->fr[d];

        if (f->b != NONE)
            sr_unplace(p, f->b, f->mark);
        f->b = NONE;
        if ((b = sr_next(p, f, cap)) == NONE) {
            if (d-- == 0)
                return false;
            continue;
        }
        if (!nodes-- || p->work > work)
            return false;
        f->mark = p->n_undo;
        f->b = b;
        if (!sr_place(p, b) || p->oom)
            return false;
        if (!sr_check(p, p->off[b], cap))
            continue;
        if (d + 1 == p->n_pos)
            return true;
        p->fr[++d] = (struct frame){p->off[b], p->pidx[b], NONE, 0, 0, NONE, 0, false};
    }
}

/* Searches for offsets within cap: the three static orders in turn with node limits
 * doubling from 2n, until the work reaches `work`. True when found (kept if best). */
bool pk_solve(struct pk *p, size_t cap, size_t work)
{
    for (size_t lim = 2 * p->n_pos + 2; p->work < work; lim *= 2)
        for (size_t o = N_GREEDY; o < SWEEP_ORDER && p->work < work; o++) {
            pk_order(p, &pk_orders[o], p->ord);
            for (size_t k = 0; k < p->n; k++)
                p->pidx[p->ord[k]] = k;
            if (sr_run(p, cap, lim, work)) {
                size_t end = 0;

                for (size_t i = 0; i < p->n; i++)
                    end = p->off[i] + p->size[i] > end ? p->off[i] + p->size[i] : end;
                pk_keep(p, end);
                return true;
            }
        }
    return false;
}
