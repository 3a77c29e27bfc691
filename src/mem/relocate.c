/*
 * relocate.c - an arena within a given size by moving live buffers (relocate.h).
 *
 * A sweep over the steps keeps every live instance's offset. At each step the dead
 * ones leave and the step's new instances are placed, largest first: in the smallest
 * gap that holds one (best fit); else in a window of the arena whose live occupants
 * are moved into other gaps, the window chosen by the fewest bytes copied (instances
 * made at this step cost nothing to move: they hold no data yet) among those without a
 * pinned occupant counting PIN_WEIGHT times its bytes, the copies' destinations
 * disjoint from every live instance's current bytes so that they can run in any order;
 * else, the last resort, every live instance slides down against the one below it,
 * which leaves the free bytes in one gap at the top: the sweep fails only when the
 * bytes live at one step pass the cap.
 * Work: O(L) per placement for L live instances, O(L log L + w L c) for a window with
 * w trials of c occupants; the deepest plans need a few hundred windows.
 */
#include "mem/relocate.h"

#include <stdlib.h>
#include <string.h>

/* Windows tried per placement that no gap holds, cheapest first. */
#define TRIALS 64
/* What moving a pinned instance costs per byte against an idle one: the executor waits
 * for its copy first (a stall the sweep avoids where it can). */
#define PIN_WEIGHT 8

struct span {
    size_t lo, hi;
};

struct cand {
    size_t cost, p; /* bytes copied; the window's offset */
    size_t a, b;    /* its occupants: live[a .. b) */
};

struct rl {
    struct instance *inst;
    const struct pin *pins;
    size_t n, cap, t, end;
    size_t *cur, *sz, *init; /* offset now, rounded size, offset when allocated */
    size_t *live, n_live;    /* live instances of nonzero size, by offset */
    size_t *cost;            /* prefix sums over live: bytes to copy, weighted */
    size_t *tmp, *to;        /* a trial's occupants and their new offsets */
    struct span *reg;        /* a trial's occupied regions, by lo */
    struct cand *cand;
    struct moves *mv;
    const remat_allocator *al;
    bool oom;
};

static bool pinned(const struct rl *r, size_t i)
{
    const struct pin *p;

    if (!r->pins || r->inst[i].first >= r->t)
        return false;
    p = &r->pins[i];
    for (int k = 0; k < 2; k++)
        if (p->lo[k] < r->t && r->t <= p->hi[k])
            return true;
    return false;
}

static bool push_move(struct rl *r, size_t i, size_t to)
{
    struct moves *mv = r->mv;

    if (r->inst[i].first < r->t) { /* made earlier: its bytes are copied */
        if (mv->n == mv->cap) {
            size_t nc = mv->cap ? 2 * mv->cap : 64;
            struct move *m = core_realloc(r->al, mv->m, sizeof *m * mv->cap, sizeof *m * nc);

            if (!m) {
                r->oom = true;
                return false;
            }
            mv->m = m;
            mv->cap = nc;
        }
        mv->m[mv->n++] = (struct move){r->t, i, r->cur[i], to, r->inst[i].bytes,
                                       pinned(r, i)};
        mv->waits += pinned(r, i);
        mv->bytes += r->inst[i].bytes;
    }
    r->cur[i] = to;
    if (to + r->sz[i] > r->end)
        r->end = to + r->sz[i];
    return true;
}

/* Keeps live sorted by offset after a few offsets changed (insertion sort: the order
 * is nearly right). */
static void sort_live(struct rl *r)
{
    for (size_t i = 1; i < r->n_live; i++) {
        size_t x = r->live[i], j = i;

        for (; j > 0 && r->cur[r->live[j - 1]] > r->cur[x]; j--)
            r->live[j] = r->live[j - 1];
        r->live[j] = x;
    }
}

/* Adds i at offset at to live, in its place by offset (the live ones are disjoint). */
static void add_live(struct rl *r, size_t i, size_t at)
{
    size_t lo = 0, hi = r->n_live;

    r->cur[i] = at;
    if (at + r->sz[i] > r->end)
        r->end = at + r->sz[i];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (r->cur[r->live[mid]] > at)
            hi = mid;
        else
            lo = mid + 1;
    }
    memmove(r->live + lo + 1, r->live + lo, (r->n_live++ - lo) * sizeof *r->live);
    r->live[lo] = i;
}

/* The smallest gap of at least s bytes below cap between the regions reg[0 .. m)
 * (sorted by lo; they may overlap), the lowest on a tie: its offset in *at. */
static bool best_fit(const struct span *reg, size_t m, size_t cap, size_t s, size_t *at)
{
    size_t pos = 0, best = SIZE_MAX;

    for (size_t i = 0; i <= m; i++) {
        size_t lo = i < m ? reg[i].lo : cap;

        if (lo > pos && lo - pos >= s && lo - pos < best) {
            best = lo - pos;
            *at = pos;
        }
        if (i < m && reg[i].hi > pos)
            pos = reg[i].hi;
    }
    return best != SIZE_MAX;
}

static size_t live_regions(struct rl *r)
{
    for (size_t i = 0; i < r->n_live; i++) {
        size_t x = r->live[i];

        r->reg[i] = (struct span){r->cur[x], r->cur[x] + r->sz[x]};
    }
    return r->n_live;
}

static bool place_in_gap(struct rl *r, size_t k)
{
    size_t at;

    if (!best_fit(r->reg, live_regions(r), r->cap, r->sz[k], &at))
        return false;
    add_live(r, k, at);
    return true;
}

/* Inserts s into reg[0 .. m) keeping it sorted by lo. */
static void insert_span(struct span *reg, size_t m, struct span s)
{
    size_t j = m;

    for (; j > 0 && reg[j - 1].lo > s.lo; j--)
        reg[j] = reg[j - 1];
    reg[j] = s;
}

static int by_size_desc(const void *x, const void *y)
{
    const size_t *a = x, *b = y;

    return a[1] != b[1] ? (a[1] < b[1] ? 1 : -1) : (a[0] > b[0]) - (a[0] < b[0]);
}

/* Moves the occupants of c's window into other gaps and puts k there: false when they
 * do not all fit. The destinations avoid every live instance's current bytes. */
static bool trial(struct rl *r, size_t k, const struct cand *c)
{
    size_t m = live_regions(r), nx = c->b - c->a, s = r->sz[k];
    size_t (*occ)[2] = (size_t(*)[2])r->tmp;

    insert_span(r->reg, m++, (struct span){c->p, c->p + s});
    for (size_t j = 0; j < nx; j++) {
        occ[j][0] = r->live[c->a + j];
        occ[j][1] = r->sz[occ[j][0]];
    }
    qsort(occ, nx, sizeof *occ, by_size_desc);
    for (size_t j = 0; j < nx; j++) {
        size_t x = occ[j][0];

        if (!best_fit(r->reg, m, r->cap, r->sz[x], &r->to[j]))
            return false;
        insert_span(r->reg, m++, (struct span){r->to[j], r->to[j] + r->sz[x]});
    }
    for (size_t j = 0; j < nx; j++)
        if (!push_move(r, occ[j][0], r->to[j]))
            return false;
    sort_live(r);
    add_live(r, k, c->p);
    return true;
}

/* Candidates in order of (cost, offset); those of one offset are equal (the same
 * occupants). */
static bool cand_less(const struct cand *a, const struct cand *b)
{
    return a->cost != b->cost ? a->cost < b->cost : a->p < b->p;
}

/* Restores the min-heap h[0 .. n) below node i. */
static void cand_down(struct cand *h, size_t n, size_t i)
{
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && cand_less(&h[c + 1], &h[c]))
            c++;
        if (!cand_less(&h[c], &h[i]))
            return;
        struct cand t = h[i];

        h[i] = h[c];
        h[c] = t;
    }
}

/* The first live index whose end passes p (ends increase with offsets: disjoint). */
static size_t first_ending_after(const struct rl *r, size_t p)
{
    size_t lo = 0, hi = r->n_live;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, x = r->live[mid];

        if (r->cur[x] + r->sz[x] > p)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The first live instance from a on that starts at or above q (live is sorted by
 * offset: every one before it starts below q). */
static size_t first_starting_from(const struct rl *r, size_t a, size_t q)
{
    size_t lo = a, hi = r->n_live;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (r->cur[r->live[mid]] >= q)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void add_cand(struct rl *r, size_t *nc, size_t p, size_t s)
{
    size_t a, b;

    if (p > r->cap || r->cap - p < s)
        return;
    a = first_ending_after(r, p);
    b = first_starting_from(r, a, p + s);
    r->cand[(*nc)++] = (struct cand){r->cost[b] - r->cost[a], p, a, b};
}

/* Places k in the window whose occupants cost the fewest bytes to move elsewhere. */
static bool place_in_window(struct rl *r, size_t k)
{
    size_t nc = 0, s = r->sz[k];

    for (size_t i = 0; i < r->n_live; i++) {
        size_t x = r->live[i];

        r->cost[i + 1] = r->cost[i] + (r->inst[x].first >= r->t ? 0
                                       : pinned(r, x)  ? PIN_WEIGHT * r->sz[x]
                                                       : r->sz[x]);
    }
    add_cand(r, &nc, 0, s);
    if (r->cap >= s)
        add_cand(r, &nc, r->cap - s, s);
    for (size_t i = 0; i < r->n_live; i++) {
        size_t x = r->live[i];

        add_cand(r, &nc, r->cur[x] + r->sz[x], s);
        if (r->cur[x] >= s)
            add_cand(r, &nc, r->cur[x] - s, s);
    }
    /* the cheapest first, each offset once: popped from a heap, since at most TRIALS
     * of up to 2L + 2 are tried (sorting them all cost GPT-2 of 1,000 layers' hybrid
     * plan 8% of its time) */
    for (size_t i = nc / 2; i-- > 0;)
        cand_down(r->cand, nc, i);
    for (size_t tried = 0, last = SIZE_MAX; nc > 0 && tried < TRIALS;) {
        struct cand c = r->cand[0];

        r->cand[0] = r->cand[--nc];
        cand_down(r->cand, nc, 0);
        if (c.p == last)
            continue;
        last = c.p;
        tried++;
        if (trial(r, k, &c))
            return true;
    }
    return false;
}

/* Slides every live instance down against the one below it. */
static bool compact(struct rl *r)
{
    size_t pos = 0;

    for (size_t i = 0; i < r->n_live; i++) {
        size_t x = r->live[i];

        if (r->cur[x] != pos && !push_move(r, x, pos))
            return false;
        pos = r->cur[x] + r->sz[x];
    }
    return true;
}

static void drop_dead(struct rl *r)
{
    size_t m = 0;

    for (size_t i = 0; i < r->n_live; i++)
        if (r->inst[r->live[i]].last >= r->t)
            r->live[m++] = r->live[i];
    r->n_live = m;
}

static bool place(struct rl *r, size_t k)
{
    if (r->sz[k] == 0) {
        r->cur[k] = 0;
        return true;
    }
    if (place_in_gap(r, k) || place_in_window(r, k))
        return true;
    return compact(r) && place_in_gap(r, k);
}

static int by_first(const void *x, const void *y)
{
    const size_t *a = x, *b = y; /* {first, size, index} */

    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    if (a[1] != b[1])
        return a[1] < b[1] ? 1 : -1;
    return (a[2] > b[2]) - (a[2] < b[2]);
}

/* The sweep over the steps in allocation order (ord: n triples first, size, index). */
static bool sweep(struct rl *r, size_t (*ord)[3])
{
    for (size_t i = 0; i < r->n;) {
        size_t j = i;

        r->t = ord[i][0];
        drop_dead(r);
        for (; j < r->n && ord[j][0] == r->t; j++)
            if (!place(r, ord[j][2]))
                return false;
        for (; i < j; i++)
            r->init[ord[i][2]] = r->cur[ord[i][2]];
    }
    return true;
}

remat_status layout_relocate(const remat_allocator *al, struct instance *inst, size_t n,
                             size_t align, size_t cap, const struct pin *pins,
                             struct moves *mv, size_t *end)
{
    struct moves got = {0};
    struct rl r = {.inst = inst, .pins = pins, .n = n, .cap = cap / align * align};
    size_t words = 8 * n + 2, (*ord)[3];
    size_t *block = core_calloc(al, words, sizeof *block);
    struct span *reg = core_calloc(al, n + 2, sizeof *reg);
    struct cand *cand = core_calloc(al, 3 * n + 2, sizeof *cand);
    bool ok = false;

    if (block && reg && cand) {
        r.cur = block;
        r.sz = block + n;
        r.init = block + 2 * n;
        r.live = block + 3 * n;
        r.cost = block + 4 * n;     /* n + 1 */
        r.tmp = block + 5 * n + 1;  /* 2 n: pairs */
        r.to = r.tmp + 2 * n;       /* n */
        r.reg = reg;
        r.cand = cand;
        r.mv = &got;
        r.al = al;
        ord = core_calloc(al, n ? n : 1, sizeof *ord);
        if (ord) {
            for (size_t i = 0; i < n; i++) {
                r.sz[i] = (inst[i].bytes + align - 1) / align * align;
                ord[i][0] = inst[i].first;
                ord[i][1] = r.sz[i];
                ord[i][2] = i;
            }
            qsort(ord, n, sizeof *ord, by_first);
            ok = sweep(&r, ord) && !r.oom;
            core_free(al, ord, sizeof *ord * (n ? n : 1));
        }
    }
    for (size_t i = 0; ok && i < n; i++)
        inst[i].offset = r.init[i];
    core_free(al, block, sizeof *block * words);
    core_free(al, reg, sizeof *reg * (n + 2));
    core_free(al, cand, sizeof *cand * (3 * n + 2));
    if (!ok) {
        moves_fini(al, &got);
        return block && reg && cand && !r.oom
                   ? REMAT_ERR_INFEASIBLE
                   : REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory relocating");
    }
    *mv = got;
    *end = r.end;
    return REMAT_OK;
}

void moves_fini(const remat_allocator *al, struct moves *mv)
{
    core_free(al, mv->m, sizeof *mv->m * mv->cap);
    memset(mv, 0, sizeof *mv);
}

static bool overlap(size_t a, size_t an, size_t b, size_t bn)
{
    return an && bn && a < b + bn && b < a + an;
}

/* The moves at boundary t, from *next on, checked and applied to off; act: the
 * instances live at t that were allocated before it (the holders of data). */
static bool check_moves_at(const struct instance *inst, size_t n, const struct moves *mv,
                           const struct pin *pins, size_t cap, size_t t, size_t *next,
                           size_t *off, const size_t *act, size_t na)
{
    for (; *next < mv->n && mv->m[*next].step == t; (*next)++) {
        const struct move *m = &mv->m[*next];
        const struct instance *x = m->inst < n ? &inst[m->inst] : NULL;

        if (!x || x->first >= t || x->last < t || off[m->inst] != m->from ||
            m->bytes != x->bytes || m->to + m->bytes > cap)
            return false;
        for (int k = 0; pins && k < 2; k++) /* a pinned one is said to wait */
            if (pins[m->inst].lo[k] < t && t <= pins[m->inst].hi[k] && !m->waits)
                return false;
        for (size_t q = 0; q < na; q++) { /* the copy overwrites no other holder of data */
            size_t j = act[q];

            if (j != m->inst && overlap(m->to, m->bytes, off[j], inst[j].bytes))
                return false;
        }
        off[m->inst] = m->to;
    }
    return true;
}

/*
 * A sweep over the steps with the instances live at each: two instances that overlap
 * at step t while neither started nor moved at t overlapped at t - 1 already (both were
 * live there, at the same offsets), so each step checks only the pairs of one that
 * started or moved there with another live one. Work: the live instances at each step
 * times those that changed there, plus the steps and instances once.
 */
bool layout_moves_check(const struct instance *inst, size_t n, const struct moves *mv,
                        const struct pin *pins, size_t cap)
{
    size_t steps = 0, next = 0, at = 0, na = 0, nc;
    size_t *off = calloc(n ? n : 1, sizeof *off), *ord = calloc(n ? n : 1, sizeof *ord);
    size_t *act = calloc(n ? n : 1, sizeof *act), *start = NULL;
    size_t *chg = calloc(n + mv->n + 1, sizeof *chg); /* started, then moved, at a step */
    bool ok;

    for (size_t i = 0; i < n; i++)
        steps = inst[i].last + 1 > steps ? inst[i].last + 1 : steps;
    start = calloc(steps + 2, sizeof *start);
    ok = off && ord && act && chg && start;
    /* ord: the instances by first step (a counting sort; those from steps on last) */
    for (size_t i = 0; ok && i < n; i++)
        start[(inst[i].first < steps ? inst[i].first : steps) + 1]++;
    for (size_t t = 0; ok && t <= steps; t++)
        start[t + 1] += start[t];
    for (size_t i = 0; ok && i < n; i++)
        ord[start[inst[i].first < steps ? inst[i].first : steps]++] = i;
    for (size_t i = 1; ok && i < mv->n; i++)
        ok = mv->m[i - 1].step <= mv->m[i].step;
    for (size_t t = 0; ok && t < steps; t++) {
        size_t keep = 0, moved_from = next;

        for (size_t q = 0; q < na; q++) /* those freed before t leave */
            if (inst[act[q]].last >= t)
                act[keep++] = act[q];
        na = keep;
        ok = check_moves_at(inst, n, mv, pins, cap, t, &next, off, act, na);
        nc = 0;
        for (size_t k = moved_from; ok && k < next; k++)
            chg[nc++] = mv->m[k].inst;
        for (; ok && at < n && inst[ord[at]].first <= t; at++) {
            size_t i = ord[at];

            off[i] = inst[i].offset;
            ok = !inst[i].bytes || off[i] + inst[i].bytes <= cap;
            if (inst[i].last < t)
                continue; /* first > last: never live */
            act[na++] = i;
            chg[nc++] = i;
        }
        for (size_t c = 0; ok && c < nc; c++)
            for (size_t q = 0; ok && q < na; q++)
                ok = act[q] == chg[c] ||
                     !overlap(off[chg[c]], inst[chg[c]].bytes, off[act[q]], inst[act[q]].bytes);
    }
    free(off);
    free(ord);
    free(act);
    free(chg);
    free(start);
    return ok && next == mv->n;
}
