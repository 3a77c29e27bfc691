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
 * about 2 log n lists are the taken bytes, and a gap among them all lies within a gap
 * of each list, so the gaps wide enough come from cutting one list's by the others'. Placing one adds its span to own
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

/* The lists whose runs are the bytes taken by the placed instances covering a rank of
 * [lo, hi) into l (sub of the range's cover nodes, own of their ancestors, each once):
 * their count, at most OCC_LISTS. */
static size_t gather(struct occ *o, size_t lo, size_t hi, const struct occ_runs **l)
{
    size_t v[2 * 64], m = cover(o, lo, hi, v), nl = 0;

    o->op++;
    for (size_t k = 0; k < m; k++) {
        if (o->sub[v[k]].n)
            l[nl++] = &o->sub[v[k]];
        for (size_t u = v[k] >> 1; u >= 1 && o->stamp[u] != o->op; u >>= 1) {
            o->stamp[u] = o->op;
            if (o->own[u].n) /* (a list never added to has no array) */
                l[nl++] = &o->own[u];
        }
    }
    return nl;
}

/* The first of r's runs from q on that ends above x (r->n when none): galloping from q,
 * since the gaps looked up ascend and most lie a few runs on. */
static size_t first_above(const struct occ_runs *r, size_t q, size_t x)
{
    size_t step = 1, hi;

    if (q >= r->n || r->a[q].hi > x)
        return q;
    while (q + step < r->n && r->a[q + step].hi <= x) {
        q += step;
        step *= 2;
    }
    hi = q + step < r->n ? q + step : r->n; /* a[q].hi <= x; a[hi].hi > x or hi = n */
    q++;
    while (q < hi) {
        size_t mid = q + (hi - q) / 2;

        if (r->a[mid].hi <= x)
            q = mid + 1;
        else
            hi = mid;
    }
    return q;
}

/* The pieces of the gaps c[0 .. nc) (ascending, disjoint) that r's runs leave free and
 * that hold a bytes, into out (ascending): their count. A run may reach over several
 * gaps, so the walk keeps it for the next gap when it reaches past this one. */
static size_t cut_gaps(const struct occ_runs *r, const struct span *c, size_t nc, size_t a,
                       struct span *out)
{
    size_t n = 0, q = 0;

    for (size_t x = 0; x < nc; x++) {
        size_t cur = c[x].lo, end = c[x].hi;

        for (q = first_above(r, q, cur); q < r->n && r->a[q].lo < end; q++) {
            if (r->a[q].lo > cur && r->a[q].lo - cur >= a)
                out[n++] = (struct span){cur, r->a[q].lo};
            cur = r->a[q].hi;
            if (cur >= end)
                break; /* reaches into the next gap: kept for it */
        }
        if (end > cur && end - cur >= a)
            out[n++] = (struct span){cur, end};
    }
    return n;
}

size_t occ_fit(struct occ *o, size_t lo, size_t hi, size_t a, bool first_fit, size_t max,
               struct span *buf)
{
    const struct occ_runs *l[OCC_LISTS];
    struct span *c = buf, *nx = buf + max + 1, *t;
    size_t nl, total = 0, end = 0, nc = 0, at = SIZE_MAX, gap = SIZE_MAX;

    if (!o->ok)
        return SIZE_MAX;
    nl = gather(o, lo, hi, l);
    for (size_t k = 0; k < nl; k++) {
        total += l[k]->n;
        end = l[k]->a[l[k]->n - 1].hi > end ? l[k]->a[l[k]->n - 1].hi : end;
    }
    if (total > max)
        return SIZE_MAX;
    /* the shortest lists first: they leave a few wide gaps, within which the longer ones
     * are then walked (GPT-2-1000's plan halfway to `none`: 13.6 lists and 829 runs a
     * query, and the gaps carried from list to list 612 in all a query this way, 800 in
     * the order gathered, 1,520 longest first) */
    for (size_t k = 1; k < nl; k++)
        for (size_t j = k; j > 0 && l[j]->n < l[j - 1]->n; j--) {
            const struct occ_runs *x = l[j];

            l[j] = l[j - 1];
            l[j - 1] = x;
        }
    if (end >= a) /* (a > 0) */
        c[nc++] = (struct span){0, end};
    for (size_t k = 0; k < nl && nc > 0; k++) {
        nc = cut_gaps(l[k], c, nc, a, nx);
        t = c;
        c = nx;
        nx = t;
    }
    if (nc == 0)
        return end;
    if (first_fit)
        return c[0].lo;
    for (size_t x = 0; x < nc; x++)
        if (c[x].hi - c[x].lo < gap) {
            gap = c[x].hi - c[x].lo;
            at = c[x].lo;
        }
    return at;
}
