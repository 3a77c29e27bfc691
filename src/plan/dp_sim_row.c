/*
 * dp_sim_row.c - the DP's block model (dp_sim.h) worked out a row at a time: every pair
 * (L_i, L_j) of one L_j, with L_i stepping down through the sets before it, each in
 * time for the nodes between L_i and the set before it plus L_i's boundary rather than
 * the whole block (the walk of dp_sim.c). The same numbers as the walk, to the byte.
 *
 * Why it can: for a node v of the block B = L_j \ L_i, whether it is kept (a successor
 * outside L_j), whether the backward recomputes it (a node of L_j saves its value, or a
 * recomputed successor reads it) and the steps of the block that touch its buffers
 * (their readers and writers descend from v, so lie in L_j \ L_i when in L_j) depend on
 * j alone. The forward's live bytes are then a sum of intervals over the node order, one
 * per buffer of the block, and the backward phase's (recomputation in node order, then
 * backward in reverse: slot v, then slot 2n - 1 - v) a sum of intervals over the slots;
 * each is added when its owner enters the block and taken away when it leaves, into a
 * segment tree whose largest entry is the peak (between the block's own steps the sums
 * only fall, so the largest entry is at a step). What depends on i, the values of ∂(L_i)
 * the block reads and the gradients of L_i's values it writes, is added for the pair
 * and taken away after it. Gradients of L_j written after it that L_i owns stay for the
 * whole phase: a constant beside the tree.
 *
 * The graph must have what the argument uses, checked once (rows.ok): each forward
 * buffer made only by the node owning it; backward steps make only gradients, of values
 * of their own node or of a predecessor; forward steps touch no gradient; a saved value
 * is the node's own or a predecessor's.
 */
#include "plan/dp_sim_int.h"

#include <string.h>

enum { ROW_KEPT = 1, ROW_NEED = 2, ROW_IN = 4 };

/* The least power of two at least n. */
static int32_t pow2_at_least(int32_t n)
{
    int32_t p = 1;

    while (p < n)
        p *= 2;
    return p;
}

static bool seg_init(const remat_allocator *a, struct seg *g, int32_t n)
{
    g->cap = pow2_at_least(n);
    g->size = g->cap;
    g->mx = core_calloc(a, 2 * (size_t)g->cap, sizeof *g->mx);
    g->ad = core_calloc(a, 2 * (size_t)g->cap, sizeof *g->ad);
    return g->mx && g->ad;
}

static void seg_fini(const remat_allocator *a, struct seg *g)
{
    core_free(a, g->mx, sizeof *g->mx * 2 * (size_t)g->cap);
    core_free(a, g->ad, sizeof *g->ad * 2 * (size_t)g->cap);
}

/* The tree over [0, n) (n at most its capacity), every entry 0. */
static void seg_reset(struct seg *g, int32_t n)
{
    g->size = pow2_at_least(n);
    memset(g->mx, 0, sizeof *g->mx * 2 * (size_t)g->size);
    memset(g->ad, 0, sizeof *g->ad * 2 * (size_t)g->size);
}

static inline void seg_fix(struct seg *g, int32_t x)
{
    int64_t a = g->mx[2 * x], b = g->mx[2 * x + 1];

    g->mx[x] = g->ad[x] + (a > b ? a : b);
}

/* v added to the entries l .. r (inclusive). */
static void seg_add(struct seg *g, int32_t l, int32_t r, int64_t v)
{
    int32_t lo = l + g->size, hi = r + g->size + 1;

    for (int32_t a = lo, b = hi; a < b; a >>= 1, b >>= 1) {
        if (a & 1) {
            g->ad[a] += v;
            g->mx[a++] += v;
        }
        if (b & 1) {
            g->ad[--b] += v;
            g->mx[b] += v;
        }
    }
    /* the ancestors of both ends, once each where the two paths meet */
    for (int32_t a = lo >> 1, b = (hi - 1) >> 1; a >= 1; a >>= 1, b >>= 1) {
        seg_fix(g, a);
        if (b != a)
            seg_fix(g, b);
    }
}

/* The largest entry of node x's range [xl, xr] from l on (acc: what its ancestors
 * add): one path down to l, with the right siblings it passes. */
static int64_t seg_from(const struct seg *g, int32_t x, int32_t xl, int32_t xr, int32_t l,
                        int64_t acc)
{
    int64_t best = INT64_MIN;

    while (l != xl) {
        int32_t mid = xl + (xr - xl) / 2;

        acc += g->ad[x];
        if (l <= mid) {
            best = acc + g->mx[2 * x + 1] > best ? acc + g->mx[2 * x + 1] : best;
            x = 2 * x;
            xr = mid;
        } else {
            x = 2 * x + 1;
            xl = mid + 1;
        }
    }
    return acc + g->mx[x] > best ? acc + g->mx[x] : best;
}

/* The same up to r: one path down to r, with the left siblings it passes. */
static int64_t seg_upto(const struct seg *g, int32_t x, int32_t xl, int32_t xr, int32_t r,
                        int64_t acc)
{
    int64_t best = INT64_MIN;

    while (r != xr) {
        int32_t mid = xl + (xr - xl) / 2;

        acc += g->ad[x];
        if (r > mid) {
            best = acc + g->mx[2 * x] > best ? acc + g->mx[2 * x] : best;
            x = 2 * x + 1;
            xl = mid + 1;
        } else {
            x = 2 * x;
            xr = mid;
        }
    }
    return acc + g->mx[x] > best ? acc + g->mx[x] : best;
}

/* The largest entry in [l, r]: down from the root to where l and r part, then l's path
 * in the left child and r's in the right. */
static int64_t seg_max(const struct seg *g, int32_t l, int32_t r)
{
    int32_t x = 1, xl = 0, xr = g->size - 1, mid;
    int64_t acc = 0, a, b;

    for (;;) {
        mid = xl + (xr - xl) / 2;
        if (l == xl && r == xr)
            return acc + g->mx[x];
        acc += g->ad[x];
        if (r <= mid) {
            x = 2 * x;
            xr = mid;
        } else if (l > mid) {
            x = 2 * x + 1;
            xl = mid + 1;
        } else {
            break;
        }
    }
    a = seg_from(g, 2 * x, xl, mid, l, acc);
    b = seg_upto(g, 2 * x + 1, mid + 1, xr, r, acc);
    return a > b ? a : b;
}

/* The largest entry in [l, size). */
static int64_t seg_suffix_max(const struct seg *g, int32_t l)
{
    return seg_from(g, 1, 0, g->size - 1, l, 0);
}

/* The inverse of node -> buffer CSR c: buffer -> nodes (each node once per touch). */
static bool invert(const remat_allocator *a, const struct csr *c, int32_t n_nodes,
                   int32_t n_bufs, struct csr *out)
{
    int32_t *fill;

    if (!dp_csr_init(a, out, (size_t)n_bufs))
        return false;
    for (int32_t v = 0; v < n_nodes; v++)
        for (int32_t e = c->at[v]; e < c->at[v + 1]; e++)
            out->at[c->to[e] + 1]++;
    for (int32_t b = 0; b < n_bufs; b++)
        out->at[b + 1] += out->at[b];
    out->n = (size_t)out->at[n_bufs];
    out->cap = out->n + 1;
    out->to = core_calloc(a, out->cap, sizeof *out->to);
    fill = core_calloc(a, (size_t)n_bufs + 1, sizeof *fill);
    if (!out->to || !fill) {
        core_free(a, fill, sizeof *fill * ((size_t)n_bufs + 1));
        return false;
    }
    memcpy(fill, out->at, sizeof *fill * (size_t)n_bufs);
    for (int32_t v = 0; v < n_nodes; v++)
        for (int32_t e = c->at[v]; e < c->at[v + 1]; e++)
            out->to[fill[c->to[e]]++] = v;
    core_free(a, fill, sizeof *fill * ((size_t)n_bufs + 1));
    return true;
}

static bool is_pred(const struct dag *d, int32_t p, int32_t v)
{
    for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++)
        if (d->pred[e] == p)
            return true;
    return false;
}

/* Whether the graph has what the row evaluation's argument uses (the file's head). */
static bool rows_exact(const struct dp_sim *s)
{
    const struct dag *d = s->d;
    int32_t nval = s->tg->n_values;

    for (int32_t v = 0; v < d->n; v++) {
        const struct top *op = &s->tg->ops[d->op[v]];

        for (int32_t e = s->fmk.at[v]; e < s->fmk.at[v + 1]; e++)
            if (s->fmk.to[e] >= nval || s->owner[s->fmk.to[e]] != v)
                return false;
        for (int32_t e = s->frd.at[v]; e < s->frd.at[v + 1]; e++)
            if (s->frd.to[e] >= nval)
                return false;
        for (int32_t e = s->bmk.at[v]; e < s->bmk.at[v + 1]; e++) {
            int32_t g = s->bmk.to[e], o = s->owner[g];

            if (g < nval || o < 0 || (o != v && !is_pred(d, o, v)))
                return false;
        }
        for (int32_t q = 0; op->has_bwd && q < op->n_saved; q++) {
            int32_t p = s->tg->values[op->saved[q]].producer;

            if (p >= 0 && d->node[p] >= 0 && d->node[p] != v && !is_pred(d, d->node[p], v))
                return false;
        }
    }
    return true;
}

/* node -> the gradients it owns, and node -> the nodes saving a value it produces. */
static bool build_owned(struct dp_sim *s)
{
    const struct dag *d = s->d;
    struct dp_rows *R = &s->rows;
    struct csr by_node;
    bool ok;

    /* gown: the gradient buffers by owner (a node -> buffer CSR inverted twice) */
    if (!dp_csr_init(s->al, &by_node, (size_t)s->nbuf))
        return false;
    ok = true;
    for (int32_t b = 0; ok && b < s->nbuf; b++) {
        if (b >= s->tg->n_values && s->owner[b] >= 0)
            ok = dp_csr_push(s->al, &by_node, s->owner[b]);
        dp_csr_row(&by_node, (size_t)b);
    }
    ok = ok && invert(s->al, &by_node, s->nbuf, d->n, &R->gown);
    dp_csr_fini(s->al, &by_node);
    if (!ok || !dp_csr_init(s->al, &by_node, (size_t)d->n))
        return false;
    for (int32_t x = 0; ok && x < d->n; x++) {
        const struct top *op = &s->tg->ops[d->op[x]];

        for (int32_t q = 0; ok && op->has_bwd && q < op->n_saved; q++) {
            int32_t p = s->tg->values[op->saved[q]].producer;

            if (p >= 0 && d->node[p] >= 0)
                ok = dp_csr_push(s->al, &by_node, d->node[p]);
        }
        dp_csr_row(&by_node, (size_t)x);
    }
    ok = ok && invert(s->al, &by_node, d->n, d->n, &R->svr);
    dp_csr_fini(s->al, &by_node);
    return ok;
}

/* Per set L: the values of ∂(L) no node of L reads (bval; live into the next block's
 * backward when it reads them) and the gradients ∂(L)'s nodes own (bgrad; written by
 * the next block's backward). */
static bool build_bounds(struct dp_sim *s)
{
    const struct lsets *ls = s->ls;
    struct dp_rows *R = &s->rows;
    bool ok = dp_csr_init(s->al, &R->bval, (size_t)ls->n) &&
              dp_csr_init(s->al, &R->bgrad, (size_t)ls->n);

    for (int32_t i = 0; ok && i < ls->n; i++) {
        for (int32_t q = ls->bd_at[i]; ok && q < ls->bd_at[i + 1]; q++) {
            int32_t o = ls->bd[q];

            for (int32_t e = s->fmk.at[o]; ok && e < s->fmk.at[o + 1]; e++) {
                int32_t b = s->fmk.to[e];
                bool in_i = false;

                for (int32_t r = s->rdr.at[b]; r < s->rdr.at[b + 1] && !in_i; r++)
                    in_i = lsets_has(ls, i, s->rdr.to[r]);
                if (!in_i)
                    ok = dp_csr_push(s->al, &R->bval, b);
            }
            for (int32_t e = R->gown.at[o]; ok && e < R->gown.at[o + 1]; e++)
                ok = dp_csr_push(s->al, &R->bgrad, R->gown.to[e]);
        }
        dp_csr_row(&R->bval, (size_t)i);
        dp_csr_row(&R->bgrad, (size_t)i);
    }
    return ok;
}

bool dp_rows_init(struct dp_sim *s)
{
    const remat_allocator *a = s->al;
    struct dp_rows *R = &s->rows;
    int32_t n = s->d->n, ns = s->ls->n;

    R->j = -1;
    if (!(R->ok = rows_exact(s)))
        return true;
    R->bits = core_calloc(a, (size_t)s->ls->words, sizeof *R->bits);
    R->nst = core_calloc(a, (size_t)n + 1, sizeof *R->nst);
    R->nfl = core_calloc(a, (size_t)n + 1, sizeof *R->nfl);
    R->gst = core_calloc(a, (size_t)s->nbuf + 1, sizeof *R->gst);
    R->tl = core_calloc(a, (size_t)s->nbuf + 1, sizeof *R->tl);
    R->tr = core_calloc(a, (size_t)s->nbuf + 1, sizeof *R->tr);
    R->tv = core_calloc(a, (size_t)s->nbuf + 1, sizeof *R->tv);
    R->rt = core_calloc(a, (size_t)ns, sizeof *R->rt);
    R->rdm = core_calloc(a, (size_t)ns, sizeof *R->rdm);
    R->rc = core_calloc(a, (size_t)ns, sizeof *R->rc);
    R->rst = core_calloc(a, (size_t)ns, sizeof *R->rst);
    if (!R->bits || !R->nst || !R->nfl || !R->gst || !R->tl || !R->tr || !R->tv || !R->rt ||
        !R->rdm || !R->rc || !R->rst || !seg_init(a, &R->fw, n) || !seg_init(a, &R->bw, 2 * n) ||
        !invert(a, &s->frd, n, s->nbuf, &R->ifrd) || !invert(a, &s->brd, n, s->nbuf, &R->ibrd) ||
        !invert(a, &s->bmk, n, s->nbuf, &R->ibmk) || !build_owned(s) || !build_bounds(s))
        return false;
    R->on = n > DP_SIM_MAX_NODES;
    return true;
}

void dp_rows_fini(struct dp_sim *s)
{
    const remat_allocator *a = s->al;
    struct dp_rows *R = &s->rows;
    size_t n = (size_t)s->d->n, ns = (size_t)s->ls->n, nb = (size_t)s->nbuf;

    core_free(a, R->bits, sizeof *R->bits * (size_t)s->ls->words);
    core_free(a, R->nst, sizeof *R->nst * (n + 1));
    core_free(a, R->nfl, sizeof *R->nfl * (n + 1));
    core_free(a, R->gst, sizeof *R->gst * (nb + 1));
    core_free(a, R->tl, sizeof *R->tl * (nb + 1));
    core_free(a, R->tr, sizeof *R->tr * (nb + 1));
    core_free(a, R->tv, sizeof *R->tv * (nb + 1));
    core_free(a, R->rt, sizeof *R->rt * ns);
    core_free(a, R->rdm, sizeof *R->rdm * ns);
    core_free(a, R->rc, sizeof *R->rc * ns);
    core_free(a, R->rst, sizeof *R->rst * ns);
    if (R->fw.mx || R->fw.ad)
        seg_fini(a, &R->fw);
    if (R->bw.mx || R->bw.ad)
        seg_fini(a, &R->bw);
    dp_csr_fini(a, &R->ifrd);
    dp_csr_fini(a, &R->ibrd);
    dp_csr_fini(a, &R->ibmk);
    dp_csr_fini(a, &R->gown);
    dp_csr_fini(a, &R->svr);
    dp_csr_fini(a, &R->bval);
    dp_csr_fini(a, &R->bgrad);
}

bool dp_sim_set_rows(struct dp_sim *s, bool on)
{
    s->rows.on = on && s->rows.ok;
    s->rows.j = -1;
    return s->rows.on;
}

bool dp_sim_rows(const struct dp_sim *s)
{
    return s->rows.on;
}

#define IN_J(R, x) bits_has((R)->bits, x)
/* node v's place in the forward, its recomputation's slot, its backward's slot */
#define POS(R, v) ((v) - (R)->base)
#define BWD(R, v) (2 * (R)->ext - 1 - ((v) - (R)->base))
#define IN_B(R, x) ((R)->nst[x] == (R)->epoch && ((R)->nfl[x] & ROW_IN))

/* v's flags for the row (its successors in L_j have theirs: they entered first). */
static void node_flags(struct dp_sim *s, int32_t v)
{
    const struct dag *d = s->d;
    struct dp_rows *R = &s->rows;
    uint8_t f = 0;

    for (int32_t e = d->succ_at[v]; e < d->succ_at[v + 1] && !f; e++)
        if (!IN_J(R, d->succ[e]))
            f = ROW_KEPT;
    for (int32_t e = R->svr.at[v]; !f && e < R->svr.at[v + 1]; e++)
        if (IN_J(R, R->svr.to[e]))
            f = ROW_NEED;
    for (int32_t e = d->succ_at[v]; !f && e < d->succ_at[v + 1]; e++)
        if (IN_J(R, d->succ[e]) && (R->nfl[d->succ[e]] & ROW_NEED))
            f = ROW_NEED;
    R->nst[v] = R->epoch;
    R->nfl[v] = f;
}

/* Node v's part of the block's sums, added (sg 1) or taken away (-1). */
static void node_part(struct dp_sim *s, int32_t v, int64_t sg)
{
    struct dp_rows *R = &s->rows;
    int32_t top = R->bw.size - 1;
    bool kept = R->nfl[v] & ROW_KEPT, need = R->nfl[v] & ROW_NEED;

    if (need) {
        R->t += sg * s->tq[v];
        R->steps += (int32_t)sg;
    }
    if (s->tg->ops[s->d->op[v]].has_bwd)
        R->steps += (int32_t)sg;
    for (int32_t e = s->fmk.at[v]; e < s->fmk.at[v + 1]; e++) {
        int32_t b = s->fmk.to[e], fend = v, last = need ? POS(R, v) : -1;
        int64_t x = sg * (int64_t)s->bytes[b];
        bool read = false;

        for (int32_t q = R->ifrd.at[b]; q < R->ifrd.at[b + 1]; q++) {
            int32_t y = R->ifrd.to[q];

            if (!IN_J(R, y))
                continue;
            read = true;
            fend = y > fend ? y : fend;
            if ((R->nfl[y] & ROW_NEED) && POS(R, y) > last)
                last = POS(R, y);
        }
        for (int32_t q = R->ibrd.at[b]; q < R->ibrd.at[b + 1]; q++) {
            int32_t y = R->ibrd.to[q];

            if (IN_J(R, y)) {
                read = true;
                last = BWD(R, y) > last ? BWD(R, y) : last;
            }
        }
        seg_add(&R->fw, POS(R, v), kept ? R->fw.size - 1 : POS(R, fend), x);
        if (kept) {
            if (last >= 0)
                seg_add(&R->bw, 0, last, x);
            if (read)
                R->dm += (size_t)x; /* wraps back when taken away */
        } else if (need) {
            seg_add(&R->bw, POS(R, v), last, x);
        }
    }
    for (int32_t e = R->gown.at[v]; e < R->gown.at[v + 1]; e++) {
        int32_t g = R->gown.to[e], first = top + 1, last = -1;

        for (int32_t q = R->ibmk.at[g]; q < R->ibmk.at[g + 1]; q++) {
            int32_t y = R->ibmk.to[q], sl = BWD(R, y);

            if (IN_J(R, y)) {
                first = sl < first ? sl : first;
                last = sl > last ? sl : last;
            }
        }
        for (int32_t q = R->ibrd.at[g]; q < R->ibrd.at[g + 1]; q++) {
            int32_t y = R->ibrd.to[q], sl = BWD(R, y);

            if (IN_J(R, y))
                last = sl > last ? sl : last;
        }
        if (R->gst[g] == R->epoch) {
            if (last >= 0)
                seg_add(&R->bw, 0, last, sg * (int64_t)s->bytes[g]);
        } else if (first <= top) {
            seg_add(&R->bw, first, last, sg * (int64_t)s->bytes[g]);
        }
    }
}

/* The block from L_j \ L_a to L_j \ L_b: nodes of L_a \ L_b enter it, of L_b \ L_a
 * leave, from the last node down. */
static void row_move(struct dp_sim *s, int32_t a, int32_t b)
{
    const struct lsets *ls = s->ls;
    struct dp_rows *R = &s->rows;
    int32_t lo = ls->row[a].full < ls->row[b].full ? ls->row[a].full : ls->row[b].full;
    int32_t hi = lsets_end(ls, a) > lsets_end(ls, b) ? lsets_end(ls, a) : lsets_end(ls, b);

    for (int32_t w = hi; w-- > lo;) {
        uint64_t wa = lsets_word(ls, a, w);

        for (uint64_t x = wa ^ lsets_word(ls, b, w); x;) {
            int bit = 63 - __builtin_clzll(x);
            int32_t v = 64 * w + bit;

            x &= ~((uint64_t)1 << bit);
            if (wa >> bit & 1) {
                if (R->nst[v] != R->epoch)
                    node_flags(s, v);
                R->nfl[v] |= ROW_IN;
                node_part(s, v, 1);
            } else {
                node_part(s, v, -1);
                R->nfl[v] &= (uint8_t)~ROW_IN;
            }
        }
    }
}

/* An interval of the pair's own (pair_peak). */
static void pair_add(struct dp_rows *R, int32_t *k, int32_t l, int32_t r, int64_t x)
{
    R->tl[*k] = l;
    R->tr[*k] = r;
    R->tv[*k] = x;
    (*k)++;
}

/* The largest entry of the backward tree with the pair's k intervals added: over each
 * run of slots where the same intervals hold, the tree's largest there plus theirs
 * (fewer steps than adding them and taking them away). */
static int64_t pair_peak(struct dp_rows *R, int32_t k)
{
    int32_t cut[2 * 64 + 1], nc = 0, top = R->bw.size - 1;
    int64_t best = 0;

    if (k == 0)
        return R->bw.mx[1];
    if (k > 64) { /* a wide boundary: add them, read, take them away */
        for (int32_t q = 0; q < k; q++)
            seg_add(&R->bw, R->tl[q], R->tr[q], R->tv[q]);
        best = R->bw.mx[1];
        for (int32_t q = 0; q < k; q++)
            seg_add(&R->bw, R->tl[q], R->tr[q], -R->tv[q]);
        return best;
    }
    for (int32_t q = 0; q < k && R->tr[q] == top; q++)
        if (q == k - 1) { /* suffixes only: their sums grow with the slot, so the
                             largest is at a suffix's start, or the tree's own */
            int64_t run = 0;

            for (int32_t a = 1; a < k; a++) /* by start */
                for (int32_t b = a; b > 0 && R->tl[b - 1] > R->tl[b]; b--) {
                    int32_t t = R->tl[b];
                    int64_t v = R->tv[b];

                    R->tl[b] = R->tl[b - 1];
                    R->tv[b] = R->tv[b - 1];
                    R->tl[b - 1] = t;
                    R->tv[b - 1] = v;
                }
            best = R->bw.mx[1];
            for (int32_t a = 0; a < k; a++) {
                int64_t m;

                run += R->tv[a];
                if (a + 1 < k && R->tl[a + 1] == R->tl[a])
                    continue;
                m = seg_suffix_max(&R->bw, R->tl[a]) + run;
                best = m > best ? m : best;
            }
            return best;
        }
    cut[nc++] = 0;
    for (int32_t q = 0; q < k; q++) {
        cut[nc++] = R->tl[q];
        if (R->tr[q] < top)
            cut[nc++] = R->tr[q] + 1;
    }
    for (int32_t a = 1; a < nc; a++) /* insertion sort: a few */
        for (int32_t b = a; b > 0 && cut[b - 1] > cut[b]; b--) {
            int32_t t = cut[b];

            cut[b] = cut[b - 1];
            cut[b - 1] = t;
        }
    for (int32_t a = 0; a < nc; a++) {
        int32_t l = cut[a], r = a + 1 < nc ? cut[a + 1] - 1 : top;
        int64_t extra = 0, m;

        if (r < l)
            continue; /* a repeated cut */
        for (int32_t q = 0; q < k; q++)
            if (R->tl[q] <= l && l <= R->tr[q])
                extra += R->tv[q];
        m = seg_max(&R->bw, l, r) + extra;
        best = m > best ? m : best;
    }
    return best;
}

/* The backward phase's last step when it is a backward (of the block's first node with
 * one), else -1 (then unknown). A buffer live from the start to that step or later
 * counts at every step: beyond it the sums only fall. */
static int32_t last_step(const struct dp_sim *s, int32_t i)
{
    const struct lsets *ls = s->ls;
    const struct dp_rows *R = &s->rows;
    int32_t end = lsets_end(ls, R->j);

    for (int32_t w = ls->row[i].full; w < end; w++)
        for (uint64_t x = R->bits[w] & ~lsets_word(ls, i, w); x; x &= x - 1) {
            int32_t v = 64 * w + __builtin_ctzll(x);

            if (s->tg->ops[s->d->op[v]].has_bwd)
                return BWD(R, v);
        }
    return -1;
}

/* The pair (i, j) with the block at L_j \ L_i: the parts that depend on i, the peaks. */
static void row_pair(struct dp_sim *s, int32_t i)
{
    struct dp_rows *R = &s->rows;
    int32_t top = R->bw.size - 1, k = 0, ls_at = last_step(s, i);
    size_t dm = R->dm, base = 0, f, b;

    for (int32_t e = s->gi.at[R->j]; e < s->gi.at[R->j + 1]; e++)
        if (!IN_B(R, s->owner[s->gi.to[e]]))
            base += s->bytes[s->gi.to[e]];
    for (int32_t e = R->bval.at[i]; e < R->bval.at[i + 1]; e++) {
        int32_t bf = R->bval.to[e], last = -1;
        bool in_j = false;

        for (int32_t r = s->rdr.at[bf]; r < s->rdr.at[bf + 1] && !in_j; r++)
            in_j = IN_J(R, s->rdr.to[r]);
        if (in_j)
            dm += s->bytes[bf];
        for (int32_t r = R->ifrd.at[bf]; r < R->ifrd.at[bf + 1]; r++) {
            int32_t y = R->ifrd.to[r];

            if (IN_B(R, y) && (R->nfl[y] & ROW_NEED) && POS(R, y) > last)
                last = POS(R, y);
        }
        for (int32_t r = R->ibrd.at[bf]; r < R->ibrd.at[bf + 1]; r++) {
            int32_t y = R->ibrd.to[r];

            if (IN_B(R, y) && BWD(R, y) > last)
                last = BWD(R, y);
        }
        if (ls_at >= 0 && last >= ls_at)
            base += s->bytes[bf];
        else if (last >= 0)
            pair_add(R, &k, 0, last, (int64_t)s->bytes[bf]);
    }
    for (int32_t e = R->bgrad.at[i]; e < R->bgrad.at[i + 1]; e++) {
        int32_t g = R->bgrad.to[e], first = top + 1;

        if (R->gst[g] == R->epoch)
            continue;
        for (int32_t r = R->ibmk.at[g]; r < R->ibmk.at[g + 1]; r++) {
            int32_t y = R->ibmk.to[r];

            if (IN_B(R, y) && BWD(R, y) < first)
                first = BWD(R, y);
        }
        if (first <= top)
            pair_add(R, &k, first, top, (int64_t)s->bytes[g]);
    }
    b = R->steps > 0 ? (size_t)pair_peak(R, k) + base : 0;
    f = s->pend[i] + (size_t)R->fw.mx[1];
    R->rt[i] = (double)R->t * s->tunit;
    R->rdm[i] = dm;
    R->rc[i] = f > b ? f : b;
    R->rst[i] = R->epoch;
}

/* Whether set i is below L_j in the row. */
static bool in_row(const struct lsets *ls, int32_t i, int32_t j)
{
    return ls->size[i] < ls->size[j] && lsets_subset(ls, i, j);
}

/* The nodes of the row's blocks lie in [base, base + ext): the trees cover that. */
static void row_extent(struct dp_sim *s, int32_t lo, int32_t j)
{
    const struct lsets *ls = s->ls;
    struct dp_rows *R = &s->rows;
    int32_t first = s->d->n, last = 0, end = lsets_end(ls, j);

    for (int32_t i = lo; i < j; i++) {
        if (!in_row(ls, i, j))
            continue;
        for (int32_t w = ls->row[i].full; w < end; w++) {
            uint64_t x = lsets_word(ls, j, w) & ~lsets_word(ls, i, w);

            if (x) {
                first = 64 * w + __builtin_ctzll(x) < first ? 64 * w + __builtin_ctzll(x)
                                                            : first;
                break;
            }
        }
        for (int32_t w = end; w-- > ls->row[i].full;) {
            uint64_t x = lsets_word(ls, j, w) & ~lsets_word(ls, i, w);

            if (x) {
                last = 64 * w + 63 - __builtin_clzll(x) > last ? 64 * w + 63 - __builtin_clzll(x)
                                                               : last;
                break;
            }
        }
    }
    R->base = first < last ? first : last;
    R->ext = last - R->base + 1;
    seg_reset(&R->fw, R->ext);
    seg_reset(&R->bw, 2 * R->ext);
}

/* Every pair (i, j) for the sets i in lo .. j - 1 that are subsets of L_j. */
static void row_run(struct dp_sim *s, int32_t lo, int32_t j)
{
    const struct lsets *ls = s->ls;
    struct dp_rows *R = &s->rows;

    R->epoch++;
    R->j = j;
    R->lo = lo;
    R->cur = j;
    R->t = 0;
    R->dm = 0;
    R->steps = 0;
    lsets_row(ls, j, R->bits);
    for (int32_t e = s->gi.at[j]; e < s->gi.at[j + 1]; e++)
        R->gst[s->gi.to[e]] = R->epoch;
    row_extent(s, lo, j);
    for (int32_t i = j; i-- > lo;) {
        if (!in_row(ls, i, j))
            continue;
        row_move(s, R->cur, i);
        R->cur = i;
        row_pair(s, i);
    }
}

bool dp_rows_pair(struct dp_sim *s, int32_t i, int32_t j, bool run, double *t, size_t *dm,
                  size_t *c)
{
    struct dp_rows *R = &s->rows;

    if (!R->on || i >= j)
        return false;
    if (R->j != j || i < R->lo) {
        if (!run)
            return false;
        row_run(s, i, j);
    }
    if (R->rst[i] != R->epoch)
        return false;
    *t = R->rt[i];
    *dm = R->rdm[i];
    *c = R->rc[i];
    return true;
}
