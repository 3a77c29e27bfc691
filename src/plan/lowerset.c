/*
 * lowerset.c - enumerating lower sets (approximate and exact families) and their
 * per-set quantities, and the thinned family hybrid's sweep uses on large graphs. A
 * hash table of bitsets removes the exact families' duplicates; the approximate family
 * has none to remove but V (see enum_approx). Measuring a family walks each set's nodes
 * and their edges: O(sum of |L| + edges out of L), about n^2 / 2 node visits for the
 * approximate family of a deep, chain-like network, unless each set is measured from
 * a subset (measure_from).
 *
 * Rows are stored compactly (struct lrow): the exact families are enumerated as dense
 * rows (a hash table removes duplicates) and compacted once sorted; the approximate
 * family is written compact as it is built, each closure in a dense scratch row first.
 * GPT-2 with 1,000 blocks: 37,008 sets of 579 words, 171 MB as dense rows.
 */
#include "plan/lowerset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lsets_fini(struct lsets *ls)
{
    const remat_allocator *a = ls->al;

    core_free(a, ls->bits, sizeof *ls->bits * ls->bits_cap);
    core_free(a, ls->row, sizeof *ls->row * ls->cap);
    core_free(a, ls->size, sizeof *ls->size * ls->cap);
    core_free(a, ls->m, sizeof *ls->m * ls->cap);
    core_free(a, ls->t, sizeof *ls->t * ls->cap);
    core_free(a, ls->m_out, sizeof *ls->m_out * ls->cap);
    core_free(a, ls->bd_at, sizeof *ls->bd_at * (ls->cap + 1));
    core_free(a, ls->bd, sizeof *ls->bd * ls->bd_cap);
    core_free(a, ls->mx_at, sizeof *ls->mx_at * (ls->cap + 1));
    core_free(a, ls->mx, sizeof *ls->mx * ls->mx_cap);
    memset(ls, 0, sizeof *ls);
}

/* Set i's words up to its end into the dense row (the rest is left as it is). */
static void expand_row(const struct lsets *ls, int32_t i, uint64_t *row)
{
    const struct lrow *r = &ls->row[i];

    memset(row, 0xff, sizeof *row * (size_t)r->full);
    memset(row + r->full, 0, sizeof *row * (size_t)(r->lead - r->full));
    if (r->len) /* (the stored words may be none at all) */
        memcpy(row + r->lead, ls->bits + r->at, sizeof *row * (size_t)r->len);
}

void lsets_row(const struct lsets *ls, int32_t i, uint64_t *out)
{
    int32_t end = lsets_end(ls, i);

    expand_row(ls, i, out);
    memset(out + end, 0, sizeof *out * (size_t)(ls->words - end));
}

/* Appends the dense row b (ls->words words) to ls->bits as set k's row, its stored
 * words from the first nonzero one past the leading full words to the last nonzero one;
 * false when out of memory. */
static bool store_row(struct lsets *ls, int32_t k, const uint64_t *b)
{
    int32_t w = ls->words, full = 0, lead, end = w;
    size_t len;

    while (full < w && b[full] == ~(uint64_t)0)
        full++;
    lead = full;
    while (lead < w && !b[lead])
        lead++;
    while (end > lead && !b[end - 1])
        end--;
    len = (size_t)(end - lead);
    if (ls->bits_cap - ls->bits_n < len) {
        size_t cap = ls->bits_cap ? 2 * ls->bits_cap : 4096;
        uint64_t *nb;

        while (cap - ls->bits_n < len)
            cap *= 2;
        nb = core_realloc(ls->al, ls->bits, sizeof *nb * ls->bits_cap, sizeof *nb * cap);
        if (!nb)
            return false;
        ls->bits = nb;
        ls->bits_cap = cap;
    }
    ls->row[k] = (struct lrow){ls->bits_n, full, lead, (int32_t)len};
    if (len)
        memcpy(ls->bits + ls->bits_n, b + lead, sizeof *b * len);
    ls->bits_n += len;
    return true;
}

/* The exact families are enumerated as dense rows of ls->words words (ls->bits, ls->cap
 * rows) until finish compacts them. */
static uint64_t *dense_bits(const struct lsets *ls, int32_t i)
{
    return ls->bits + (size_t)i * (size_t)ls->words;
}

/* Open-addressing set of bitsets (indices into the dense rows). */
struct htab {
    int32_t *slot;             /* -1 empty */
    size_t cap;
};

static bool grow_sets(struct lsets *ls, size_t need)
{
    size_t cap = ls->cap ? ls->cap : 64, w = (size_t)ls->words;
    uint64_t *b;
    int32_t *sz;

    if (need <= ls->cap)
        return true;
    while (cap < need)
        cap *= 2;
    /* both new before either old goes: the two arrays always share ls->cap */
    b = core_alloc(ls->al, sizeof *b * cap * w);
    sz = core_alloc(ls->al, sizeof *sz * cap);
    if (!b || !sz) {
        core_free(ls->al, b, sizeof *b * cap * w);
        core_free(ls->al, sz, sizeof *sz * cap);
        return false;
    }
    if (ls->cap) {
        memcpy(b, ls->bits, sizeof *b * ls->cap * w);
        memcpy(sz, ls->size, sizeof *sz * ls->cap);
    }
    core_free(ls->al, ls->bits, sizeof *b * ls->cap * w);
    core_free(ls->al, ls->size, sizeof *sz * ls->cap);
    ls->bits = b;
    ls->bits_cap = cap * w;
    ls->size = sz;
    ls->cap = cap;
    return true;
}

static bool htab_grow(const remat_allocator *a, struct htab *h, const struct lsets *ls)
{
    size_t cap = h->cap ? 2 * h->cap : 1024;
    int32_t *s = core_alloc(a, sizeof *s * cap);

    if (!s)
        return false;
    for (size_t i = 0; i < cap; i++)
        s[i] = -1;
    for (size_t i = 0; i < h->cap; i++)
        if (h->slot[i] >= 0) {
            size_t k = bits_hash(dense_bits(ls, h->slot[i]), ls->words) & (cap - 1);

            while (s[k] >= 0)
                k = (k + 1) & (cap - 1);
            s[k] = h->slot[i];
        }
    core_free(a, h->slot, sizeof *h->slot * h->cap);
    h->slot = s;
    h->cap = cap;
    return true;
}

/* Adds the bitset b if new; *added tells. REMAT_ERR_NOMEM on failure. */
static remat_status add_set(struct lsets *ls, struct htab *h, const uint64_t *b, bool *added)
{
    size_t k;

    *added = false;
    if ((size_t)ls->n * 2 + 2 > h->cap && !htab_grow(ls->al, h, ls))
        goto nomem;
    k = bits_hash(b, ls->words) & (h->cap - 1);
    while (h->slot[k] >= 0) {
        if (!memcmp(dense_bits(ls, h->slot[k]), b, sizeof *b * (size_t)ls->words))
            return REMAT_OK;
        k = (k + 1) & (h->cap - 1);
    }
    if (!grow_sets(ls, (size_t)ls->n + 1))
        goto nomem;
    memcpy(dense_bits(ls, ls->n), b, sizeof *b * (size_t)ls->words);
    ls->size[ls->n] = bits_count(b, ls->words);
    h->slot[k] = ls->n++;
    *added = true;
    return REMAT_OK;
nomem:
    return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory enumerating lower sets (%d so far)",
                      ls->n);
}

static remat_status too_many(int64_t max_sets)
{
    return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "the graph has more than %lld lower sets: the "
                      "exact DP would take too long; use approx-tc or approx-mc, or raise "
                      "--max-lower-sets", (long long)max_sets);
}

/* Set i plus node v, added to ls when v is addable (not in set i, its predecessors all
 * in it); *added tells whether that made a new set. b: scratch of one set. */
static remat_status extend(struct lsets *ls, struct htab *h, const struct dag *d, int32_t i,
                           int32_t v, uint64_t *b, int64_t max_sets, bool *added)
{
    remat_status st;
    bool ok;

    *added = false;
    memcpy(b, dense_bits(ls, i), sizeof *b * (size_t)ls->words);
    ok = !bits_has(b, v);
    for (int32_t e = d->pred_at[v]; ok && e < d->pred_at[v + 1]; e++)
        ok = bits_has(b, d->pred[e]);
    if (!ok)
        return REMAT_OK;
    bits_set(b, v);
    if ((st = add_set(ls, h, b, added)))
        return st;
    return ls->n > max_sets ? too_many(max_sets) : REMAT_OK;
}

/* Breadth-first over the lattice: each set's extensions by one node whose predecessors
 * are all inside it. */
static remat_status enum_exact(const struct dag *d, struct lsets *ls, struct htab *h,
                               int64_t max_sets)
{
    size_t w = (size_t)ls->words;
    uint64_t *b = core_calloc(ls->al, w, sizeof *b);
    remat_status st;
    bool added;

    if (!b)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory enumerating lower sets");
    if ((st = add_set(ls, h, b, &added)))
        goto out;
    for (int32_t i = 0; i < ls->n; i++)
        for (int32_t v = 0; v < d->n; v++)
            if ((st = extend(ls, h, d, i, v, b, max_sets, &added)))
                goto out;
out:
    core_free(ls->al, b, sizeof *b * w);
    return st;
}

/* The authors' numbering (LS_EXACT_DFS): a stack of sets, each popped set extended by
 * every addable node in key order; a new set is numbered and pushed. */
static remat_status enum_exact_dfs(const struct dag *d, const int32_t *key, struct lsets *ls,
                                   struct htab *h, int64_t max_sets)
{
    const remat_allocator *a = ls->al;
    size_t w = (size_t)ls->words, n = (size_t)d->n, cap = 1024, top = 0;
    uint64_t *b = core_calloc(a, w, sizeof *b);
    int32_t *order = core_calloc(a, n + 1, sizeof *order);
    int32_t *stack = core_calloc(a, cap, sizeof *stack);
    remat_status st;
    bool added;

    if (!b || !order || !stack) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory enumerating lower sets");
        goto out;
    }
    /* order: nodes by key (ties by node), an insertion sort's worth of work is fine. */
    for (size_t r = 0; r < n; r++) {
        int32_t v = (int32_t)r, k = key ? key[v] : v;
        size_t q = r;

        while (q > 0 && (key ? key[order[q - 1]] : order[q - 1]) > k) {
            order[q] = order[q - 1];
            q--;
        }
        order[q] = v;
    }
    if ((st = add_set(ls, h, b, &added)))
        goto out;
    stack[top++] = 0;
    while (top > 0) {
        int32_t id = stack[--top];

        for (size_t r = 0; r < n; r++) {
            if ((st = extend(ls, h, d, id, order[r], b, max_sets, &added)))
                goto out;
            if (!added)
                continue;
            if (top == cap) {
                int32_t *ns = core_realloc(a, stack, sizeof *stack * cap, sizeof *stack * 2 * cap);

                if (!ns) {
                    st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory enumerating lower sets");
                    goto out;
                }
                stack = ns;
                cap *= 2;
            }
            stack[top++] = ls->n - 1;
        }
    }
out:
    core_free(a, b, sizeof *b * w);
    core_free(a, order, sizeof *order * (n + 1));
    core_free(a, stack, sizeof *stack * cap);
    return st;
}

static const struct lsets *sort_ctx;
static const size_t *sort_m;

/* By M(L), then size, then creation order: a strict subset comes first (its M is at
 * most its superset's, its size less), and the sets a block of at most B/2 bytes can
 * start from are a contiguous run before each set (kusumoto.c). */
static int cmp_m_size(const void *x, const void *y)
{
    int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;

    if (sort_m[i] != sort_m[j])
        return sort_m[i] < sort_m[j] ? -1 : 1;
    if (sort_ctx->size[i] != sort_ctx->size[j])
        return sort_ctx->size[i] < sort_ctx->size[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* M(L) of every set, for the sort, over every node of the set (dense rows). */
static size_t *set_bytes(const struct dag *d, const struct lsets *ls, size_t n)
{
    size_t *m = core_calloc(ls->al, n ? n : 1, sizeof *m);

    for (size_t i = 0; m && i < n; i++) {
        const uint64_t *b = dense_bits(ls, (int32_t)i);

        for (int k = 0; k < ls->words; k++)
            for (uint64_t x = b[k]; x; x &= x - 1)
                m[i] += d->m[64 * k + __builtin_ctzll(x)];
    }
    return m;
}

/* Appends v to a CSR list of capacity *cap (grown by doubling). */
static bool push_node(const remat_allocator *a, int32_t **list, size_t *cap, int32_t at,
                      int32_t v)
{
    if ((size_t)at == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        int32_t *nl = core_realloc(a, *list, sizeof *nl * *cap, sizeof *nl * nc);

        if (!nl)
            return false;
        *list = nl;
        *cap = nc;
    }
    (*list)[at] = v;
    return true;
}

/*
 * The quantities of set i (the sets before it measured): M, T, m_out, its boundary
 * and its maximal nodes (lsets_subset), appended to the CSR lists. One walk over its
 * nodes' edges; the successors outside it listed as they are met, so that their
 * other predecessors cost their own edges rather than a scan of every node. mark
 * (3n, zero at first) stamps δ+(L), δ−(δ+(L)) and holds the list.
 */
static bool measure(const struct dag *d, struct lsets *ls, int32_t i, int32_t *mark)
{
    int32_t stamp = i + 1, *out = mark + 2 * (size_t)d->n, n_out = 0;
    int32_t nb = ls->bd_at[i], nx = ls->mx_at[i]; /* where set i - 1's lists end */

    for (int32_t k = 0, end = lsets_end(ls, i); k < end; k++)
        for (uint64_t x = lsets_word(ls, i, k); x; x &= x - 1) {
            int32_t v = 64 * k + __builtin_ctzll(x);
            bool out_succ = false, in_succ = false;

            ls->m[i] += d->m[v];
            ls->t[i] += d->t[v];
            for (int32_t e = d->succ_at[v]; e < d->succ_at[v + 1]; e++) {
                int32_t s = d->succ[e];

                if (lsets_has(ls, i, s)) {
                    in_succ = true;
                    continue;
                }
                out_succ = true;
                if (mark[s] == stamp)
                    continue;
                mark[s] = stamp; /* s ∈ δ+(L) */
                out[n_out++] = s;
                ls->m_out[i] += d->m[s];
            }
            if ((out_succ && !push_node(ls->al, &ls->bd, &ls->bd_cap, nb++, v)) ||
                (!in_succ && !push_node(ls->al, &ls->mx, &ls->mx_cap, nx++, v)))
                return false;
        }
    /* δ−(δ+(L)) \ L: the other predecessors of the successors. */
    for (int32_t q = 0; q < n_out; q++)
        for (int32_t e = d->pred_at[out[q]]; e < d->pred_at[out[q] + 1]; e++) {
            int32_t u = d->pred[e];

            if (!lsets_has(ls, i, u) && mark[d->n + u] != stamp) {
                mark[d->n + u] = stamp; /* counted even when u ∈ δ+(L) too */
                ls->m_out[i] += d->m[u];
            }
        }
    ls->bd_at[i + 1] = nb;
    ls->mx_at[i + 1] = nx;
    return true;
}

/*
 * Set i's quantities from those of set b, a subset of it measured before (the same
 * numbers and lists as measure): M and T add the nodes of L_i \ L_b (T exactly so when
 * the costs are whole numbers, sums_exact); a boundary node of L_i is a boundary node
 * of L_b or new, and so is a maximal node (a node of L_b with a successor outside L_i
 * had one outside L_b; one with a successor in L_b has it in L_i). So the walk covers
 * the new nodes and L_b's two lists, merged in node order, instead of all of L_i:
 * O(words + |new| + |∂(L_b)| + |max(L_b)|) and their edges, not O(|L_i|); the words
 * are those past L_b's full ones up to L_i's end.
 */
static bool measure_from(const struct dag *d, struct lsets *ls, int32_t i, int32_t b,
                         int32_t *mark)
{
    int32_t stamp = i + 1, *out = mark + 2 * (size_t)d->n, n_out = 0;
    int32_t nb = ls->bd_at[i], nx = ls->mx_at[i];
    int32_t p = ls->bd_at[b], pe = ls->bd_at[b + 1], q = ls->mx_at[b], qe = ls->mx_at[b + 1];
    int32_t k = ls->row[b].full, end = lsets_end(ls, i);
    uint64_t x = k < end ? lsets_word(ls, i, k) & ~lsets_word(ls, b, k) : 0;

    ls->m[i] = ls->m[b];
    ls->t[i] = ls->t[b];
    for (;;) {
        int32_t v = INT32_MAX, nv;
        bool out_succ = false, in_succ = false;

        while (!x && ++k < end)
            x = lsets_word(ls, i, k) & ~lsets_word(ls, b, k);
        nv = x ? 64 * k + __builtin_ctzll(x) : INT32_MAX; /* the next new node */
        v = p < pe && ls->bd[p] < v ? ls->bd[p] : v;
        v = q < qe && ls->mx[q] < v ? ls->mx[q] : v;
        v = nv < v ? nv : v;
        if (v == INT32_MAX)
            break;
        if (v == nv) {
            ls->m[i] += d->m[v];
            ls->t[i] += d->t[v];
            x &= x - 1;
        }
        p += p < pe && ls->bd[p] == v;
        q += q < qe && ls->mx[q] == v;
        for (int32_t e = d->succ_at[v]; e < d->succ_at[v + 1]; e++) {
            int32_t sv = d->succ[e];

            if (lsets_has(ls, i, sv)) {
                in_succ = true;
                continue;
            }
            out_succ = true;
            if (mark[sv] == stamp)
                continue;
            mark[sv] = stamp; /* sv ∈ δ+(L) */
            out[n_out++] = sv;
            ls->m_out[i] += d->m[sv];
        }
        if ((out_succ && !push_node(ls->al, &ls->bd, &ls->bd_cap, nb++, v)) ||
            (!in_succ && !push_node(ls->al, &ls->mx, &ls->mx_cap, nx++, v)))
            return false;
    }
    for (int32_t r = 0; r < n_out; r++) /* δ−(δ+(L)) \ L, as measure */
        for (int32_t e = d->pred_at[out[r]]; e < d->pred_at[out[r] + 1]; e++) {
            int32_t u = d->pred[e];

            if (!lsets_has(ls, i, u) && mark[d->n + u] != stamp) {
                mark[d->n + u] = stamp;
                ls->m_out[i] += d->m[u];
            }
        }
    ls->bd_at[i + 1] = nb;
    ls->mx_at[i + 1] = nx;
    return true;
}

/* True when adding node costs in any order gives the same T: whole numbers whose total
 * stays below 2^53. */
static bool sums_exact(const struct dag *d)
{
    double total = 0;

    for (int32_t v = 0; v < d->n; v++) {
        if (d->t[v] < 0 || d->t[v] != floor(d->t[v]))
            return false;
        total += d->t[v];
    }
    return total < 9007199254740992.0;
}

/*
 * Fills the per-set quantities of ls's sets, in their order. base (by index; NULL: none)
 * names for each set a subset before it that measure_from starts from (-1: measure walks
 * the whole set).
 */
static remat_status measure_all(const struct dag *d, struct lsets *ls, const int32_t *base)
{
    const remat_allocator *a = ls->al;
    int32_t *mark = core_calloc(a, 3 * (size_t)d->n + 1, sizeof *mark);
    remat_status st = REMAT_OK;

    ls->m = core_calloc(a, ls->cap, sizeof *ls->m);
    ls->t = core_calloc(a, ls->cap, sizeof *ls->t);
    ls->m_out = core_calloc(a, ls->cap, sizeof *ls->m_out);
    ls->bd_at = core_calloc(a, ls->cap + 1, sizeof *ls->bd_at);
    ls->mx_at = core_calloc(a, ls->cap + 1, sizeof *ls->mx_at);
    if (!ls->m || !ls->t || !ls->m_out || !ls->bd_at || !ls->mx_at || !mark)
        goto nomem;
    for (int32_t i = 0; i < ls->n; i++)
        if (!(base && base[i] >= 0 ? measure_from(d, ls, i, base[i], mark)
                                   : measure(d, ls, i, mark)))
            goto nomem;
    goto out;
nomem:
    st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory measuring lower sets");
out:
    core_free(a, mark, sizeof *mark * (3 * (size_t)d->n + 1));
    return st;
}

/* The exact families: sorts the sets by M(L) and size (cmp_m_size), or with dfs keeps
 * the numbering up to V's, compacts their rows in that order and fills the per-set
 * quantities. */
static remat_status finish(const struct dag *d, struct lsets *ls, bool dfs)
{
    const remat_allocator *a = ls->al;
    size_t w = (size_t)ls->words, n = (size_t)ls->n, n_all = n, dense_cap = ls->bits_cap;
    int32_t *perm = core_calloc(a, n_all, sizeof *perm);
    int32_t *size = core_calloc(a, ls->cap, sizeof *size);
    uint64_t *dense = ls->bits;
    remat_status st = REMAT_OK;

    ls->row = core_calloc(a, ls->cap, sizeof *ls->row);
    if (!perm || !size || !ls->row)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    if (dfs) {
        while (n > 0 && ls->size[n - 1] != d->n) /* V: the last set a chain can reach */
            n--;
        ls->n = (int32_t)n;
    } else {
        size_t *m = set_bytes(d, ls, n);

        if (!m)
            goto nomem;
        sort_ctx = ls;
        sort_m = m;
        qsort(perm, n, sizeof *perm, cmp_m_size);
        core_free(a, m, sizeof *m * (n ? n : 1));
        ls->by_m = true;
    }
    ls->bits = NULL; /* the compact rows, from the dense ones in their new order */
    ls->bits_n = ls->bits_cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (!store_row(ls, (int32_t)i, dense + (size_t)perm[i] * w))
            goto nomem;
        size[i] = ls->size[perm[i]];
    }
    core_free(a, ls->size, sizeof *ls->size * ls->cap);
    ls->size = size;
    size = NULL;
    st = measure_all(d, ls, NULL);
    goto out;
nomem:
    st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory measuring lower sets");
out:
    if (dense != ls->bits)
        core_free(a, dense, sizeof *dense * dense_cap);
    core_free(a, perm, sizeof *perm * n_all);
    core_free(a, size, sizeof *size * ls->cap);
    return st;
}

/* ORs set i into the dense row, adding the nodes it brings to *size and *m. */
static void or_row(const struct dag *d, const struct lsets *ls, int32_t i, uint64_t *row,
                   int32_t *size, size_t *m)
{
    const struct lrow *r = &ls->row[i];

    for (int32_t q = 0; q < r->full + r->len; q++) {
        int32_t w = q < r->full ? q : r->lead + q - r->full;
        uint64_t x = (q < r->full ? ~(uint64_t)0 : ls->bits[r->at + (size_t)(q - r->full)]) &
                     ~row[w]; /* nodes new to the row */

        row[w] |= x;
        for (; x; x &= x - 1) {
            (*size)++;
            *m += d->m[64 * w + __builtin_ctzll(x)];
        }
    }
}

/*
 * The approximate family in creation order, into ls's rows and ls->size (room for n + 2
 * sets): ∅, the ancestor closure of each node in node order (set v + 1), then V. No
 * hash table: the closures of two nodes differ (each holds its node, and u in v's
 * closure with v in u's means u = v) and ∅ differs from them all, so only V can repeat
 * a set: the closure of a node every other node reaches (at most one), or ∅ when n = 0;
 * V is then left out, the family being a set of sets.
 *
 * A closure starts as its predecessor of largest size (the first such; ∅ without
 * predecessors), recorded as its base (base[k], by creation index; -1: none), the
 * subset measure_from works from. Its size and M (m[k], the sort's key) add what the
 * other predecessors' closures bring, counted as they are ORed in, and the node itself.
 * The nodes are numbered in a topological order, so node v's closure lies in the words
 * up to v's: each closure is built in row (dense, zero, ls->words words) over those
 * words, stored compactly (store_row) and cleared. O(v / 64) per edge into v. False when
 * out of memory.
 */
static bool enum_approx(const struct dag *d, struct lsets *ls, int32_t *base, size_t *m,
                        uint64_t *row)
{
    size_t m_all = 0;
    int32_t *size = ls->size, n = d->n;
    bool v_dup = n == 0;

    size[0] = 0;
    m[0] = 0;
    base[0] = -1;
    if (!store_row(ls, 0, row)) /* ∅ */
        return false;
    for (int32_t v = 0; v < n; v++) {
        int32_t k = v + 1, big = 0; /* set indices: node u's closure is set u + 1 */

        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++) {
            REMAT_ASSERT(d->pred[e] < v);
            if (size[d->pred[e] + 1] > size[big])
                big = d->pred[e] + 1;
        }
        expand_row(ls, big, row);
        size[k] = size[big];
        m[k] = m[big];
        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++)
            if (d->pred[e] + 1 != big)
                or_row(d, ls, d->pred[e] + 1, row, &size[k], &m[k]);
        bits_set(row, v);
        size[k]++;
        m[k] += d->m[v];
        base[k] = big;
        v_dup = v_dup || size[k] == n;
        m_all += d->m[v];
        if (!store_row(ls, k, row))
            return false;
        memset(row, 0, sizeof *row * (size_t)(v / 64 + 1));
    }
    ls->n = n + 1;
    if (v_dup)
        return true;
    for (int32_t v = 0; v < n; v++) /* V */
        bits_set(row, v);
    size[ls->n] = n;
    m[ls->n] = m_all;
    base[ls->n] = -1;
    if (!store_row(ls, ls->n, row))
        return false;
    ls->n++;
    return true;
}

/*
 * The approximate family (LS_APPROX; LS_APPROX_WALK with !incremental): enumerated,
 * sorted by M(L) and size (cmp_m_size, ties by creation index: the rows stay where they
 * are stored, their descriptors move), and measured, each set from its base (LS_APPROX,
 * when sums_exact) or walked in full. The scratch is O(n + words).
 */
static remat_status build_approx(const struct dag *d, struct lsets *ls, bool incremental)
{
    const remat_allocator *a = ls->al;
    size_t w = (size_t)ls->words, cap = (size_t)d->n + 2;
    int32_t *base = core_alloc(a, sizeof *base * cap), *perm = core_alloc(a, sizeof *perm * cap);
    int32_t *pos = core_alloc(a, sizeof *pos * cap);
    size_t *m = core_alloc(a, sizeof *m * cap);
    uint64_t *row = core_calloc(a, w, sizeof *row);
    struct lrow *rows = core_alloc(a, sizeof *rows * cap);
    remat_status st = REMAT_OK;

    ls->cap = cap;
    ls->row = core_alloc(a, sizeof *ls->row * cap);
    ls->size = core_alloc(a, sizeof *ls->size * cap);
    if (!base || !perm || !pos || !m || !row || !rows || !ls->row || !ls->size ||
        !enum_approx(d, ls, base, m, row)) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory enumerating lower sets");
        goto out;
    }
    for (int32_t i = 0; i < ls->n; i++)
        perm[i] = i;
    sort_ctx = ls;
    sort_m = m;
    qsort(perm, (size_t)ls->n, sizeof *perm, cmp_m_size);
    ls->by_m = true;
    for (int32_t i = 0; i < ls->n; i++) { /* set i becomes the former set perm[i] */
        rows[i] = ls->row[perm[i]];
        pos[i] = ls->size[perm[i]];
    }
    memcpy(ls->row, rows, sizeof *rows * (size_t)ls->n);
    memcpy(ls->size, pos, sizeof *pos * (size_t)ls->n);
    if (!incremental || !sums_exact(d)) { /* T summed in another order could differ in
                                             its last bits */
        st = measure_all(d, ls, NULL);
        goto out;
    }
    for (int32_t i = 0; i < ls->n; i++)
        pos[perm[i]] = i;
    for (int32_t i = 0; i < ls->n; i++) /* perm becomes the bases by sorted index */
        perm[i] = base[perm[i]] >= 0 ? pos[base[perm[i]]] : -1;
    st = measure_all(d, ls, perm);
out:
    core_free(a, base, sizeof *base * cap);
    core_free(a, perm, sizeof *perm * cap);
    core_free(a, pos, sizeof *pos * cap);
    core_free(a, m, sizeof *m * cap);
    core_free(a, row, sizeof *row * w);
    core_free(a, rows, sizeof *rows * cap);
    return st;
}

remat_status lsets_build(const struct dag *d, enum lsets_family fam, const int32_t *key,
                         int64_t max_sets, struct lsets *ls)
{
    struct htab h = {NULL, 0};
    remat_status st;

    memset(ls, 0, sizeof *ls);
    ls->al = d->al;
    ls->words = d->words > 0 ? d->words : 1;
    if (fam == LS_APPROX || fam == LS_APPROX_WALK) {
        st = build_approx(d, ls, fam == LS_APPROX);
    } else {
        st = fam == LS_EXACT ? enum_exact(d, ls, &h, max_sets)
                             : enum_exact_dfs(d, key, ls, &h, max_sets);
        core_free(ls->al, h.slot, sizeof *h.slot * h.cap);
        if (!st)
            st = finish(d, ls, fam == LS_EXACT_DFS);
    }
    if (st)
        lsets_fini(ls);
    return st;
}
