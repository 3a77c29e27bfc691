/*
 * pack_sweep.c - the packer's best-fit pass in order of first step, as a sweep over the
 * steps (pack_run.h).
 *
 * In that order the placed instances that overlap the next one in time are exactly
 * those live at its first step, and those are disjoint in address: the pass is an
 * allocator's best fit, run forward. So instead of gathering and sorting the placed
 * ones each time (pk_pass: O(c log c) for c of them; 3.3 s a pass where `none` keeps
 * 44,000 activations live at once, on GPT-2 of 1,000 layers) it keeps:
 * - the live instances in a list by offset (each gap lies between two neighbours);
 * - the gaps between them in a treap keyed by (bytes, offset), so that the smallest
 *   gap that holds an instance, the lowest of equal ones, is one descent away;
 * - the live instances bucketed by the rank at which they die.
 * A gap is named by the instance below it (node i + 1; node 0: the gap from offset 0).
 * Work: O(n log n) expected for n instances.
 */
#include "mem/pack_run.h"

#define NONE SIZE_MAX

struct sweep {
    const size_t *size;
    size_t *off;
    size_t *prev, *next, head, tail; /* the live list by offset (NONE: none) */
    size_t *glo, *gbytes, *gl, *gr;  /* gap node g: [glo, glo + gbytes), its treap children */
    bool *in;                        /* gap node g is in the treap */
    size_t root;
};

/* A fixed pseudo-random priority per node (a max-heap on it keeps the treap shallow). */
static uint64_t prio(size_t g)
{
    uint64_t x = (uint64_t)g * 0x9e3779b97f4a7c15ull;

    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

/* Gap g before gap h in (bytes, offset). */
static bool gap_less(const struct sweep *s, size_t g, size_t h)
{
    return s->gbytes[g] != s->gbytes[h] ? s->gbytes[g] < s->gbytes[h] : s->glo[g] < s->glo[h];
}

/* Splits t into the gaps before g (*a) and the rest (*b). */
static void split(struct sweep *s, size_t t, size_t g, size_t *a, size_t *b)
{
    if (t == NONE) {
        *a = *b = NONE;
    } else if (gap_less(s, t, g)) {
        split(s, s->gr[t], g, &s->gr[t], b);
        *a = t;
    } else {
        split(s, s->gl[t], g, a, &s->gl[t]);
        *b = t;
    }
}

/* Joins a and b, every gap of a before every gap of b. */
static size_t join(struct sweep *s, size_t a, size_t b)
{
    if (a == NONE || b == NONE)
        return a == NONE ? b : a;
    if (prio(a) > prio(b)) {
        s->gr[a] = join(s, s->gr[a], b);
        return a;
    }
    s->gl[b] = join(s, a, s->gl[b]);
    return b;
}

/* Removes gap g from the treap (where it is in it). */
static void gap_clear(struct sweep *s, size_t g)
{
    size_t *link = &s->root;

    if (!s->in[g])
        return;
    while (*link != g) /* the keys are distinct: offsets differ between gaps */
        link = gap_less(s, g, *link) ? &s->gl[*link] : &s->gr[*link];
    *link = join(s, s->gl[g], s->gr[g]);
    s->in[g] = false;
}

/* Gap g becomes [lo, hi), in the treap when not empty. */
static void gap_set(struct sweep *s, size_t g, size_t lo, size_t hi)
{
    size_t a, b;

    gap_clear(s, g);
    if (hi <= lo)
        return;
    s->glo[g] = lo;
    s->gbytes[g] = hi - lo;
    s->gl[g] = s->gr[g] = NONE;
    s->in[g] = true;
    split(s, s->root, g, &a, &b);
    s->root = join(s, join(s, a, g), b);
}

/* The smallest gap of at least `bytes`, the lowest of equal ones; NONE when none. */
static size_t gap_fit(const struct sweep *s, size_t bytes)
{
    size_t best = NONE;

    for (size_t t = s->root; t != NONE;)
        if (s->gbytes[t] >= bytes) {
            best = t;
            t = s->gl[t];
        } else {
            t = s->gr[t];
        }
    return best;
}

/* The gap node above live instance i, or below the lowest (i NONE). */
static size_t above(size_t i)
{
    return i == NONE ? 0 : i + 1;
}

static size_t top_of(const struct sweep *s, size_t i)
{
    return i == NONE ? 0 : s->off[i] + s->size[i];
}

/* Places i (nonzero size) in the smallest gap that holds it, else on top; its offset. */
static size_t place(struct sweep *s, size_t i)
{
    size_t a = s->size[i], g = gap_fit(s, a), p, q;

    if (g != NONE) {
        p = g ? g - 1 : NONE;
        q = p == NONE ? s->head : s->next[p];
        s->off[i] = s->glo[g];
        gap_clear(s, g); /* i now starts where the gap did */
        gap_set(s, i + 1, s->off[i] + a, s->off[q]);
    } else {
        p = s->tail;
        q = NONE;
        s->off[i] = top_of(s, p);
    }
    s->prev[i] = p;
    s->next[i] = q;
    *(p == NONE ? &s->head : &s->next[p]) = i;
    *(q == NONE ? &s->tail : &s->prev[q]) = i;
    return s->off[i];
}

/* Removes live instance i: the gaps on both sides become one (none on top). */
static void release(struct sweep *s, size_t i)
{
    size_t p = s->prev[i], q = s->next[i];

    gap_clear(s, above(i));
    *(p == NONE ? &s->head : &s->next[p]) = q;
    *(q == NONE ? &s->tail : &s->prev[q]) = p;
    if (q == NONE)
        gap_clear(s, above(p));
    else
        gap_set(s, above(p), top_of(s, p), s->off[q]);
}

size_t pack_sweep(const remat_allocator *al, size_t n, size_t nu, const size_t *size,
                  const size_t *lo, const size_t *hi, const size_t *ord, size_t *off,
                  size_t cut)
{
    size_t words = 6 * (n + 1) + (nu + 1) + n, end = 0, r = 0;
    size_t *w = core_alloc(al, words * sizeof *w + (n + 1) * sizeof(bool));
    struct sweep s;
    size_t *dies, *dies_next; /* per rank, the live instances dying there: a list */

    if (!w)
        return NONE;
    s = (struct sweep){size, off, w, w + n + 1, NONE, NONE, w + 2 * (n + 1), w + 3 * (n + 1),
                       w + 4 * (n + 1), w + 5 * (n + 1), (bool *)(w + words), NONE};
    dies = w + 6 * (n + 1);
    dies_next = dies + nu + 1;
    for (size_t k = 0; k <= nu; k++)
        dies[k] = NONE;
    for (size_t g = 0; g <= n; g++)
        s.in[g] = false;
    for (size_t k = 0; k < n && end < cut; k++) {
        size_t i = ord[k];

        for (; r < lo[i]; r++) /* ranks r + 1 .. lo[i]: their dead leave */
            for (size_t j = dies[r + 1]; j != NONE; j = dies_next[j])
                release(&s, j);
        off[i] = 0;
        if (!size[i])
            continue;
        if (place(&s, i) + size[i] > end)
            end = off[i] + size[i];
        dies_next[i] = dies[hi[i]];
        dies[hi[i]] = i;
    }
    core_free(al, w, words * sizeof *w + (n + 1) * sizeof(bool));
    return end < cut ? end : NONE;
}
