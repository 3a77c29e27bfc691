/*
 * pack_repair.c - a packing that ends a little above the bound, mended (pk_repair).
 *
 * The greedy passes place each instance once, in their order, and an instance that
 * finds no gap wide enough goes above the others. On the deepest plans that is often
 * one large instance at a step where the bytes live come within a few hundred KiB of
 * the bound: GPT-2 of 1,000 layers, approx-tc at 1.2% of the way from its least total to
 * `none`'s, ends 2,719,744 bytes above the bound because its loss's 205 MB probabilities
 * find the 205 MB of logits below them, and the 3 MiB hole that would let them fit lies
 * at the bottom of the arena, under a 64-byte instance. So the few instances above the
 * bound are taken out and placed again within it, each at the offset where it displaces
 * the least bytes x steps of the instances it overlaps in time (the short-lived are the
 * easiest to place again: by bytes alone, the 3 MiB under the logits went first to
 * slots of values live through the backward, which fit nowhere else; no larger one, none
 * on the chain being placed, at most REPAIR_EVICT of them); the displaced are placed the same
 * way, one level deeper, and at the last level only where nothing is displaced (an
 * ejection chain). A placement whose displaced cannot all be placed is undone and the
 * next offset tried. The work is bounded by counts, not time, so the same instances
 * always get the same offsets.
 */
#include "mem/pack_pk.h"

#include <stdlib.h>
#include <string.h>

#define REPAIR_ABOVE 8   /* instances above the bound, at most */
#define REPAIR_DEPTH 3   /* levels of displacement below the instances above */
#define REPAIR_TRIES 4   /* offsets tried for one instance, least displaced first */
#define REPAIR_EVICT 64  /* instances one placement may displace */
#define REPAIR_CALLS 512 /* placements tried in all */
#define REPAIR_WORK 65536 /* and instances visited: this many, or n where that is more */

struct obst {
    size_t lo, hi, j;
};

struct cand {
    double cost; /* bytes x steps displaced */
    size_t x;
};

struct undo {
    size_t j, off;
};

struct rp {
    struct pk *p;
    size_t *off;                        /* working offsets; NONE: out, to be placed */
    unsigned char *lock;                /* on the chain being placed: not displaced */
    struct obst *ob[REPAIR_DEPTH + 1];  /* per level: the placed ones overlapping */
    size_t *xs[REPAIR_DEPTH + 1];       /* per level: the offsets to try */
    struct undo *log;
    size_t n_log, cap_log, calls, work, max_work;
    bool oom;
};

static int ob_cmp(const void *x, const void *y)
{
    const struct obst *a = x, *b = y;

    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

static int sz_cmp(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;

    return (a > b) - (a < b);
}

static bool note(struct rp *r, size_t j)
{
    if (r->n_log == r->cap_log) {
        size_t cap = r->cap_log ? 2 * r->cap_log : 64;
        struct undo *nl = core_realloc(r->p->al, r->log, r->cap_log * sizeof *nl,
                                       cap * sizeof *nl);

        if (!nl) {
            r->oom = true;
            return false;
        }
        r->log = nl;
        r->cap_log = cap;
    }
    r->log[r->n_log++] = (struct undo){j, r->off[j]};
    return true;
}

static void undo_to(struct rp *r, size_t mark)
{
    while (r->n_log > mark) {
        r->n_log--;
        r->off[r->log[r->n_log].j] = r->log[r->n_log].off;
    }
}

/* The instances of ob[0 .. m) (by lo; none wider than widest) that [x, x + a) meets
 * into kk (at most REPAIR_EVICT), their bytes x steps into *cost: false when one may
 * not be displaced (locked, larger than a, or more than REPAIR_EVICT of them). */
static bool displaced(const struct rp *r, const struct obst *ob, size_t m, size_t widest,
                      size_t x, size_t a, size_t *kk, size_t *nk, double *cost)
{
    size_t lo = 0, hi = m;

    while (lo < hi) { /* the first starting at or above x + a */
        size_t mid = lo + (hi - lo) / 2;

        if (ob[mid].lo < x + a)
            lo = mid + 1;
        else
            hi = mid;
    }
    *nk = 0;
    *cost = 0;
    for (size_t q = lo; q-- > 0 && ob[q].lo + widest > x;) {
        size_t j = ob[q].j;

        if (ob[q].hi <= x)
            continue;
        if (r->lock[j] || r->p->size[j] > a || *nk == REPAIR_EVICT)
            return false;
        kk[(*nk)++] = j;
        *cost += (double)r->p->size[j] *
                 (double)(r->p->inst[j].last - r->p->inst[j].first + 1);
    }
    return true;
}

static void add_obst(struct obst *ob, size_t *m, size_t off, size_t size, size_t j)
{
    ob[(*m)++] = (struct obst){off, off + size, j};
}

/* Places instance k (out) within the bound, displacing at most `depth` levels deep:
 * true when it and every instance it displaced are placed. */
static bool place(struct rp *r, size_t k, int depth)
{
    struct pk *p = r->p;
    struct obst *ob = r->ob[depth];
    size_t *xs = r->xs[depth], a = p->size[k], m = 0, nx = 0, widest = 0, j;
    struct cand best[REPAIR_TRIES];
    int nb = 0;

    if (r->oom || ++r->calls > REPAIR_CALLS || r->work > r->max_work || a > p->bound)
        return false;
    FOR_OVERLAP(p, k, j, if (r->off[j] != NONE) add_obst(ob, &m, r->off[j], p->size[j], j));
    r->work += m;
    qsort(ob, m, sizeof *ob, ob_cmp);
    for (size_t q = 0; q < m; q++) {
        widest = ob[q].hi - ob[q].lo > widest ? ob[q].hi - ob[q].lo : widest;
        if (ob[q].hi + a <= p->bound)
            xs[nx++] = ob[q].hi;
        if (ob[q].lo >= a && depth > 0)
            xs[nx++] = ob[q].lo - a;
    }
    xs[nx++] = 0;
    qsort(xs, nx, sizeof *xs, sz_cmp);
    for (size_t q = 0; q < nx; q++) {
        size_t kk[REPAIR_EVICT], nk;
        double cost;
        int at;

        if (q && xs[q] == xs[q - 1])
            continue;
        if (!displaced(r, ob, m, widest, xs[q], a, kk, &nk, &cost) || (nk && depth == 0))
            continue;
        if (nk == 0) { /* a gap: nothing better */
            best[0] = (struct cand){0, xs[q]};
            nb = 1;
            break;
        }
        for (at = nb; at > 0 && best[at - 1].cost > cost; at--)
            if (at < REPAIR_TRIES)
                best[at] = best[at - 1];
        if (at < REPAIR_TRIES) {
            best[at] = (struct cand){cost, xs[q]};
            nb += nb < REPAIR_TRIES;
        }
    }
    for (int c = 0; c < nb; c++) {
        size_t kk[REPAIR_EVICT], nk, mark = r->n_log;
        double cost;
        bool ok = true;

        /* ob is this level's still: the deeper levels have their own */
        displaced(r, ob, m, widest, best[c].x, a, kk, &nk, &cost);
        if (!note(r, k))
            return false;
        r->off[k] = best[c].x;
        for (size_t e = 0; e < nk; e++) {
            if (!note(r, kk[e]))
                return false;
            r->off[kk[e]] = NONE;
        }
        for (size_t e = 1; e < nk; e++) /* the largest first; on a tie, the lower index */
            for (size_t f = e; f > 0 && (p->size[kk[f]] > p->size[kk[f - 1]] ||
                                         (p->size[kk[f]] == p->size[kk[f - 1]] &&
                                          kk[f] < kk[f - 1]));
                 f--) {
                size_t t = kk[f];

                kk[f] = kk[f - 1];
                kk[f - 1] = t;
            }
        r->lock[k] = 1;
        for (size_t e = 0; e < nk && ok; e++)
            ok = place(r, kk[e], depth - 1);
        r->lock[k] = 0;
        if (ok)
            return true;
        undo_to(r, mark);
    }
    return false;
}

void pk_repair(struct pk *p)
{
    struct rp r = {.p = p, .max_work = p->n > REPAIR_WORK ? p->n : REPAIR_WORK};
    size_t above[REPAIR_ABOVE], na = 0, n = p->n, end = 0;
    bool ok = true;

    if (p->best == NONE || p->best <= p->bound)
        return;
    for (size_t i = 0; i < n; i++)
        if (p->size[i] && p->best_off[i] + p->size[i] > p->bound) {
            if (na == REPAIR_ABOVE)
                return;
            above[na++] = i;
        }
    r.off = p->off;
    memcpy(r.off, p->best_off, n * sizeof *r.off);
    r.lock = core_calloc(p->al, n, 1);
    for (int d = 0; d <= REPAIR_DEPTH; d++) {
        r.ob[d] = core_alloc(p->al, n * sizeof *r.ob[d]);
        r.xs[d] = core_alloc(p->al, (2 * n + 1) * sizeof *r.xs[d]);
        ok = ok && r.ob[d] && r.xs[d];
    }
    ok = ok && r.lock;
    for (size_t e = 1; e < na; e++) /* the largest first; on a tie, the lower index */
        for (size_t f = e; f > 0 && p->size[above[f]] > p->size[above[f - 1]]; f--) {
            size_t t = above[f];

            above[f] = above[f - 1];
            above[f - 1] = t;
        }
    for (size_t e = 0; e < na; e++)
        r.off[above[e]] = NONE;
    for (size_t e = 0; e < na && ok; e++)
        ok = place(&r, above[e], REPAIR_DEPTH);
    for (size_t i = 0; i < n && ok; i++)
        end = p->size[i] && r.off[i] + p->size[i] > end ? r.off[i] + p->size[i] : end;
    if (ok && end < p->best) {
        p->best = end;
        memcpy(p->best_off, r.off, n * sizeof *r.off);
    }
    for (int d = 0; d <= REPAIR_DEPTH; d++) {
        core_free(p->al, r.ob[d], n * sizeof *r.ob[d]);
        core_free(p->al, r.xs[d], (2 * n + 1) * sizeof *r.xs[d]);
    }
    core_free(p->al, r.lock, n);
    core_free(p->al, r.log, r.cap_log * sizeof *r.log);
}
