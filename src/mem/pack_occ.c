/*
 * pack_occ.c - the bytes that the placed instances overlapping a range of ranks take,
 * as a few merged runs, for the packer's passes (pack_run.h).
 *
 * A pass places each instance in a gap between the placed ones it overlaps in time.
 * Gathering those one by one costs as many as there are (tens of thousands at once
 * where most values stay live to the backward); their bytes, merged where they touch,
 * are usually a handful of runs, since a good packing leaves few holes. So a segment
 * tree on the ranks keeps, per node v, merged runs (sorted, disjoint, not touching):
 *   own[v]  the spans of the placed instances of which v is a cover node;
 *   sub[v]  those of the placed instances with a cover node in v's subtree.
 * An instance meets a range of ranks exactly when one of its cover nodes lies inside
 * one of the range's cover nodes (sub) or above one (own of the ancestors): the runs of
 * about 2 log n lists, merged, are the taken bytes. Placing one adds its span to own
 * of its cover nodes and to sub of them and their ancestors: O(log n) lists.
 * Two Fenwick trees on the ranks (the placed instances by first and by last rank)
 * count the placed ones a range meets, which the passes count as work.
 */
#include "mem/pack_run.h"

#include <string.h>

/* Adds s to the merged runs of l: false when out of memory. */
static bool runs_add(const remat_allocator *al, struct occ_runs *l, struct span s)
{
    size_t lo = 0, hi = l->n, k, e;

    while (lo < hi) { /* k: the first run ending at or above s.lo */
        size_t mid = lo + (hi - lo) / 2;

        if (l->a[mid].hi < s.lo)
            lo = mid + 1;
        else
            hi = mid;
    }
    k = lo;
    for (e = k; e < l->n && l->a[e].lo <= s.hi; e++) /* those touching or meeting s */
        ;
    if (e > k) {
        s.lo = l->a[k].lo < s.lo ? l->a[k].lo : s.lo;
        s.hi = l->a[e - 1].hi > s.hi ? l->a[e - 1].hi : s.hi;
        l->a[k] = s;
        memmove(l->a + k + 1, l->a + e, (l->n - e) * sizeof *l->a);
        l->n -= e - k - 1;
        return true;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 4;
        struct span *a = core_realloc(al, l->a, l->cap * sizeof *a, nc * sizeof *a);

        if (!a)
            return false;
        l->a = a;
        l->cap = nc;
    }
    memmove(l->a + k + 1, l->a + k, (l->n - k) * sizeof *l->a);
    l->a[k] = s;
    l->n++;
    return true;
}

bool occ_init(struct occ *o, const remat_allocator *al, size_t ns, size_t nu)
{
    *o = (struct occ){.al = al, .ns = ns, .nu = nu};
    o->own = core_calloc(al, 4 * ns, sizeof *o->own); /* own, then sub */
    o->stamp = core_calloc(al, 2 * ns + 2 * (nu + 1), sizeof *o->stamp);
    o->ok = o->own && o->stamp;
    if (!o->ok) {
        occ_fini(o);
        return false;
    }
    o->sub = o->own + 2 * ns;
    o->by_lo = o->stamp + 2 * ns;
    o->by_hi = o->by_lo + nu + 1;
    return true;
}

void occ_fini(struct occ *o)
{
    for (size_t v = 0; o->own && v < 4 * o->ns; v++)
        core_free(o->al, o->own[v].a, o->own[v].cap * sizeof *o->own[v].a);
    core_free(o->al, o->own, 4 * o->ns * sizeof *o->own);
    core_free(o->al, o->stamp, (2 * o->ns + 2 * (o->nu + 1)) * sizeof *o->stamp);
    o->own = NULL;
    o->stamp = NULL;
    o->ok = false;
}

/* Fenwick tree t on ranks 0 .. nu - 1 (1-based inside): adds one at rank r. */
static void fen_add(size_t *t, size_t nu, size_t r)
{
    for (size_t x = r + 1; x <= nu; x += x & -x)
        t[x]++;
}

/* How many were added at ranks below r. */
static size_t fen_below(const size_t *t, size_t r)
{
    size_t c = 0;

    for (size_t x = r; x > 0; x -= x & -x)
        c += t[x];
    return c;
}

/* The cover nodes of ranks [lo, hi) into v[] (at most 2 log2(ns) + 2), their count. */
static size_t cover(const struct occ *o, size_t lo, size_t hi, size_t *v)
{
    size_t m = 0;

    for (size_t l = lo + o->ns, r = hi + o->ns; l < r; l >>= 1, r >>= 1) {
        if (l & 1)
            v[m++] = l++;
        if (r & 1)
            v[m++] = --r;
    }
    return m;
}

void occ_add(struct occ *o, size_t lo, size_t hi, struct span s)
{
    size_t v[2 * 64], m = cover(o, lo, hi, v);

    if (!o->ok)
        return;
    o->n_placed++;
    fen_add(o->by_lo, o->nu, lo);
    fen_add(o->by_hi, o->nu, hi - 1);
    o->op++;
    for (size_t k = 0; k < m && o->ok; k++) {
        o->ok = runs_add(o->al, &o->own[v[k]], s);
        for (size_t u = v[k]; u >= 1 && o->stamp[u] != o->op && o->ok; u >>= 1) {
            o->stamp[u] = o->op; /* above here, an earlier cover node's climb added s */
            o->ok = runs_add(o->al, &o->sub[u], s);
        }
    }
}

size_t occ_placed(const struct occ *o, size_t lo, size_t hi)
{
    /* those starting below hi, less those ending before lo (each of which starts
     * below hi too) */
    return fen_below(o->by_lo, hi) - fen_below(o->by_hi, lo);
}

size_t occ_runs(struct occ *o, size_t lo, size_t hi, struct span *out, size_t max,
                size_t *at, size_t *n_lists)
{
    const struct occ_runs *l[OCC_LISTS];
    size_t v[2 * 64], m = cover(o, lo, hi, v), nl = 0, total = 0;

    if (!o->ok)
        return SIZE_MAX;
    o->op++;
    for (size_t k = 0; k < m; k++) {
        l[nl++] = &o->sub[v[k]];
        for (size_t u = v[k] >> 1; u >= 1 && o->stamp[u] != o->op; u >>= 1) {
            o->stamp[u] = o->op;
            l[nl++] = &o->own[u];
        }
    }
    for (size_t k = 0; k < nl; k++)
        total += l[k]->n;
    if (total > max)
        return SIZE_MAX;
    total = 0;
    *n_lists = 0;
    for (size_t k = 0; k < nl; k++) {
        if (!l[k]->n) /* (a list never added to has no array) */
            continue;
        at[(*n_lists)++] = total;
        memcpy(out + total, l[k]->a, l[k]->n * sizeof *out);
        total += l[k]->n;
    }
    at[*n_lists] = total;
    return total;
}
