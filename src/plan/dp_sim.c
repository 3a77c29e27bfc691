/*
 * dp_sim.c - the DP's block cost as the simulator charges it (dp_sim.h).
 *
 * Per node, what its FWD and BWD steps read and make (step_touch, buffer ids); per
 * forward buffer, the nodes that read it (forward or backward); per set L, pend(L):
 * the bytes of ∂(L)'s values that no node of L reads, live during the forward of the
 * next block but not charged to the state, and the gradients of L that a backward
 * outside L writes, live when L's last block starts its backward.
 *
 * A pair is evaluated by walking the block's steps twice (last uses, then live bytes),
 * with per-buffer and per-node scratch stamped by an epoch so nothing is cleared.
 * Sizes: CSR arrays of the graph's touches and of the sets' boundaries.
 */
#include "plan/dp_sim_int.h"
#include "sched/schedule.h"

#include <math.h>
#include <string.h>

/* The most sets whose pairs are kept: 24 bytes a pair, 147 MB at most (an approximate
 * family of up to DP_SIM_MAX_NODES nodes: 1,002 sets, 12 MB; the exact families of
 * GPT-2 small, 3,033 sets, and of its 6-layer reduction, 1,521, whose least budget's
 * search without them worked every pair out again in each of its runs: 14 and 21 s
 * instead of about 4.5). Larger families go without. */
#define MEMO_SETS 3500
_Static_assert(DP_SIM_MAX_SETS <= MEMO_SETS, "the second family's pairs are memoized");

bool dp_csr_push(const remat_allocator *a, struct csr *c, int32_t x)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        int32_t *t = core_realloc(a, c->to, sizeof *t * c->cap, sizeof *t * cap);

        if (!t)
            return false;
        c->to = t;
        c->cap = cap;
    }
    c->to[c->n++] = x;
    return true;
}

/* Ends row r (rows are closed in order, at has n_rows + 1 entries). */
void dp_csr_row(struct csr *c, size_t r)
{
    c->at[r + 1] = (int32_t)c->n;
}

void dp_csr_fini(const remat_allocator *a, struct csr *c)
{
    core_free(a, c->at, sizeof *c->at * (c->n_rows + 1));
    core_free(a, c->to, sizeof *c->to * c->cap);
}

bool dp_csr_init(const remat_allocator *a, struct csr *c, size_t rows)
{
    memset(c, 0, sizeof *c);
    c->n_rows = rows;
    c->at = core_calloc(a, rows + 1, sizeof *c->at);
    return c->at != NULL;
}

void dp_sim_free(struct dp_sim *s)
{
    const remat_allocator *a;
    size_t nb, n, ns;

    if (!s)
        return;
    a = s->al;
    nb = (size_t)s->nbuf;
    n = (size_t)s->d->n;
    ns = (size_t)s->ls->n;
    core_free(a, s->owner, sizeof *s->owner * nb);
    core_free(a, s->bytes, sizeof *s->bytes * nb);
    dp_csr_fini(a, &s->frd);
    dp_csr_fini(a, &s->fmk);
    dp_csr_fini(a, &s->brd);
    dp_csr_fini(a, &s->bmk);
    dp_csr_fini(a, &s->rdr);
    dp_csr_fini(a, &s->gi);
    core_free(a, s->pend, sizeof *s->pend * (ns + 1));
    core_free(a, s->stamp, sizeof *s->stamp * nb);
    core_free(a, s->last, sizeof *s->last * nb);
    core_free(a, s->fstamp, sizeof *s->fstamp * nb);
    core_free(a, s->flast, sizeof *s->flast * nb);
    core_free(a, s->live, sizeof *s->live * nb);
    core_free(a, s->persist, sizeof *s->persist * nb);
    core_free(a, s->nstamp, sizeof *s->nstamp * (n + 1));
    core_free(a, s->kstamp, sizeof *s->kstamp * (n + 1));
    core_free(a, s->need, sizeof *s->need * (n + 1));
    core_free(a, s->blk, sizeof *s->blk * (n + 1));
    core_free(a, s->steps, sizeof *s->steps * (2 * n + 1));
    core_free(a, s->row_i, sizeof *s->row_i * (size_t)s->ls->words);
    core_free(a, s->row_j, sizeof *s->row_j * (size_t)s->ls->words);
    core_free(a, s->memo, sizeof *s->memo * s->n_memo);
    core_free(a, s->tq, sizeof *s->tq * (n + 1));
    dp_rows_fini(s);
    core_free(a, s, sizeof *s);
}

/* Each forward buffer's readers (nodes whose FWD or BWD reads it): counted, then
 * placed. */
static bool build_readers(struct dp_sim *s)
{
    struct csr *r = &s->rdr;
    int32_t *fill = NULL;

    for (int pass = 0; pass < 2; pass++) {
        for (int32_t v = 0; v < s->d->n; v++)
            for (int h = 0; h < 2; h++) {
                const struct csr *c = h ? &s->brd : &s->frd;

                for (int32_t e = c->at[v]; e < c->at[v + 1]; e++) {
                    int32_t b = c->to[e];

                    if (b >= s->tg->n_values)
                        continue;
                    if (pass == 0)
                        r->at[b + 1]++;
                    else
                        r->to[fill[b]++] = v;
                }
            }
        if (pass == 1)
            break;
        for (int32_t b = 0; b < s->nbuf; b++)
            r->at[b + 1] += r->at[b];
        r->n = (size_t)r->at[s->nbuf];
        r->cap = r->n + 1;
        r->to = core_calloc(s->al, r->cap, sizeof *r->to);
        fill = core_calloc(s->al, (size_t)s->nbuf + 1, sizeof *fill);
        if (!r->to || !fill) {
            core_free(s->al, fill, sizeof *fill * ((size_t)s->nbuf + 1));
            return false;
        }
        memcpy(fill, r->at, sizeof *fill * (size_t)s->nbuf);
    }
    core_free(s->al, fill, sizeof *fill * ((size_t)s->nbuf + 1));
    return true;
}

/* The touches of every node's FWD and BWD, and each forward buffer's readers. */
static bool build_touches(struct dp_sim *s)
{
    const remat_tgraph *tg = s->tg;
    const struct dag *d = s->d;
    const remat_allocator *a = s->al;
    int32_t mt = step_max_touch(tg), nr, nm, *rd, *mk;
    size_t n = (size_t)d->n;
    bool ok;

    rd = core_calloc(a, (size_t)mt, sizeof *rd);
    mk = core_calloc(a, (size_t)mt, sizeof *mk);
    ok = rd && mk && dp_csr_init(a, &s->frd, n) && dp_csr_init(a, &s->fmk, n) &&
         dp_csr_init(a, &s->brd, n) && dp_csr_init(a, &s->bmk, n) &&
         dp_csr_init(a, &s->rdr, (size_t)s->nbuf);
    for (int32_t v = 0; ok && v < d->n; v++) {
        const struct top *op = &tg->ops[d->op[v]];

        step_touch(tg, (remat_step){REMAT_STEP_FWD, d->op[v]}, rd, &nr, mk, &nm);
        for (int32_t k = 0; ok && k < nr; k++)
            ok = dp_csr_push(a, &s->frd, rd[k]);
        for (int32_t k = 0; ok && k < nm; k++)
            ok = dp_csr_push(a, &s->fmk, mk[k]);
        nr = nm = 0;
        if (op->has_bwd)
            step_touch(tg, (remat_step){REMAT_STEP_BWD, d->op[v]}, rd, &nr, mk, &nm);
        for (int32_t k = 0; ok && k < nr; k++)
            ok = dp_csr_push(a, &s->brd, rd[k]);
        for (int32_t k = 0; ok && k < nm; k++)
            ok = dp_csr_push(a, &s->bmk, mk[k]);
        dp_csr_row(&s->frd, (size_t)v);
        dp_csr_row(&s->fmk, (size_t)v);
        dp_csr_row(&s->brd, (size_t)v);
        dp_csr_row(&s->bmk, (size_t)v);
    }
    if (ok)
        ok = build_readers(s);
    core_free(a, rd, sizeof *rd * (size_t)mt);
    core_free(a, mk, sizeof *mk * (size_t)mt);
    return ok;
}

/* Whether forward buffer b has a reader in the set with bits bs. */
static bool read_in(const struct dp_sim *s, int32_t b, const uint64_t *bs)
{
    for (int32_t e = s->rdr.at[b]; e < s->rdr.at[b + 1]; e++)
        if (bits_has(bs, s->rdr.to[e]))
            return true;
    return false;
}

/* pend(L) and the gradients of L written outside L, for every set. */
static bool build_sets(struct dp_sim *s)
{
    const struct lsets *ls = s->ls;
    const struct dag *d = s->d;

    if (!dp_csr_init(s->al, &s->gi, (size_t)ls->n))
        return false;
    s->pend = core_calloc(s->al, (size_t)ls->n + 1, sizeof *s->pend);
    if (!s->pend)
        return false;
    for (int32_t i = 0; i < ls->n; i++) {
        const uint64_t *bi = s->row_i;

        lsets_row(ls, i, s->row_i);
        s->epoch++;
        for (int32_t k = ls->bd_at[i]; k < ls->bd_at[i + 1]; k++) {
            int32_t y = ls->bd[k];

            for (int32_t e = s->fmk.at[y]; e < s->fmk.at[y + 1]; e++)
                if (!read_in(s, s->fmk.to[e], bi))
                    s->pend[i] += s->bytes[s->fmk.to[e]];
            for (int32_t e = d->succ_at[y]; e < d->succ_at[y + 1]; e++) {
                int32_t x = d->succ[e];

                if (bits_has(bi, x))
                    continue;
                for (int32_t q = s->bmk.at[x]; q < s->bmk.at[x + 1]; q++) {
                    int32_t g = s->bmk.to[q];

                    if (s->owner[g] < 0 || !bits_has(bi, s->owner[g]) ||
                        s->stamp[g] == s->epoch)
                        continue;
                    s->stamp[g] = s->epoch;
                    if (!dp_csr_push(s->al, &s->gi, g))
                        return false;
                }
            }
        }
        dp_csr_row(&s->gi, (size_t)i);
    }
    return true;
}

/* Each node's cost as a multiple of one unit, 2^-k with k the most that keeps the sum of
 * the costs' magnitudes below 2^61: the recomputed cost of a block is then a sum of
 * integers, the same in whatever order it is added (the rows add and take away). */
static void cost_units(struct dp_sim *s)
{
    double total = 0;
    int k = 0;

    for (int32_t v = 0; v < s->d->n; v++)
        total += fabs(s->d->t[v]);
    if (total > 0 && isfinite(total))
        k = 61 - (int)ceil(log2(total)) - 1;
    k = k > 60 ? 60 : k < -60 ? -60 : k;
    s->tunit = ldexp(1.0, -k);
    for (int32_t v = 0; v < s->d->n; v++)
        s->tq[v] = isfinite(s->d->t[v]) ? (int64_t)llround(ldexp(s->d->t[v], k)) : 0;
}

remat_status dp_sim_new(const remat_tgraph *tg, const struct dag *d, const struct lsets *ls,
                        struct dp_sim **out)
{
    const remat_allocator *a = d->al;
    struct dp_sim *s = core_calloc(a, 1, sizeof *s);
    size_t nb, n = (size_t)d->n;

    *out = NULL;
    if (!s)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the DP's memory model");
    s->tg = tg;
    s->d = d;
    s->ls = ls;
    s->al = a;
    s->nbuf = 2 * tg->n_values;
    nb = (size_t)s->nbuf;
    s->owner = core_calloc(a, nb, sizeof *s->owner);
    s->bytes = core_calloc(a, nb, sizeof *s->bytes);
    s->stamp = core_calloc(a, nb, sizeof *s->stamp);
    s->last = core_calloc(a, nb, sizeof *s->last);
    s->fstamp = core_calloc(a, nb, sizeof *s->fstamp);
    s->flast = core_calloc(a, nb, sizeof *s->flast);
    s->live = core_calloc(a, nb, sizeof *s->live);
    s->persist = core_calloc(a, nb, sizeof *s->persist);
    s->nstamp = core_calloc(a, n + 1, sizeof *s->nstamp);
    s->kstamp = core_calloc(a, n + 1, sizeof *s->kstamp);
    s->need = core_calloc(a, n + 1, sizeof *s->need);
    s->blk = core_calloc(a, n + 1, sizeof *s->blk);
    s->steps = core_calloc(a, 2 * n + 1, sizeof *s->steps);
    s->row_i = core_calloc(a, (size_t)ls->words, sizeof *s->row_i);
    s->row_j = core_calloc(a, (size_t)ls->words, sizeof *s->row_j);
    s->tq = core_calloc(a, n + 1, sizeof *s->tq);
    if (!s->tq || !s->owner || !s->bytes || !s->stamp || !s->last || !s->fstamp || !s->flast ||
        !s->live || !s->persist || !s->nstamp || !s->kstamp || !s->need || !s->blk ||
        !s->steps || !s->row_i || !s->row_j)
        goto nomem;
    for (int32_t b = 0; b < s->nbuf; b++) {
        int32_t v = b < tg->n_values ? b : b - tg->n_values;
        int32_t p = tg->values[tg->values[v].buf].producer;

        s->owner[b] = p >= 0 ? d->node[p] : -1;
        s->bytes[b] = tgraph_buf_bytes(tg, b);
    }
    cost_units(s);
    if (!build_touches(s) || !build_sets(s) || !dp_rows_init(s))
        goto nomem;
    if (ls->n <= MEMO_SETS) {
        size_t np = (size_t)ls->n * (size_t)(ls->n - 1) / 2 + 1;

        if (!(s->memo = core_calloc(a, np, sizeof *s->memo)))
            goto nomem;
        s->n_memo = np;
    }
    *out = s;
    return REMAT_OK;
nomem:
    dp_sim_free(s);
    return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory building the DP's memory model");
}

#define IN_BLOCK(s, v) ((s)->nstamp[v] == (s)->epoch)
#define KEPT(s, v) ((s)->kstamp[v] == (s)->epoch)

/* The block's nodes (topological), which are kept, which the backward recomputes (as
 * chain_lower's mark_needed), and the recomputed cost. Returns the node count. */
static int32_t block_nodes(struct dp_sim *s, const uint64_t *bi, const uint64_t *bj,
                           double *t)
{
    const struct dag *d = s->d;
    const remat_tgraph *tg = s->tg;
    int32_t nb = 0;
    int64_t tq;

    for (int w = 0; w < s->ls->words; w++)
        for (uint64_t x = bj[w] & ~bi[w]; x; x &= x - 1) {
            int32_t v = 64 * w + __builtin_ctzll(x);

            s->blk[nb++] = v;
            s->nstamp[v] = s->epoch;
            for (int32_t e = d->succ_at[v]; e < d->succ_at[v + 1]; e++)
                if (!bits_has(bj, d->succ[e])) {
                    s->kstamp[v] = s->epoch;
                    break;
                }
        }
    for (int32_t k = nb; k-- > 0;) {
        const struct top *op = &tg->ops[d->op[s->blk[k]]];

        for (int32_t q = 0; op->has_bwd && q < op->n_saved; q++) {
            int32_t p = tg->values[op->saved[q]].producer;

            if (p >= 0 && IN_BLOCK(s, d->node[p]) && !KEPT(s, d->node[p]))
                s->need[d->node[p]] = s->epoch;
        }
    }
    tq = 0;
    for (int32_t k = nb; k-- > 0;) {
        int32_t v = s->blk[k];

        if (s->need[v] != s->epoch || KEPT(s, v))
            continue;
        tq += s->tq[v];
        for (int32_t e = d->pred_at[v]; e < d->pred_at[v + 1]; e++)
            if (IN_BLOCK(s, d->pred[e]) && !KEPT(s, d->pred[e]))
                s->need[d->pred[e]] = s->epoch;
    }
    *t = (double)tq * s->tunit;
    return nb;
}

/* The most the block's own values add at one step of its forward (kept values stay,
 * the others go after their last forward reader in the block). */
static size_t fwd_peak(struct dp_sim *s, int32_t nb)
{
    size_t cur = 0, peak = 0;

    for (int32_t k = 0; k < nb; k++) {
        int32_t v = s->blk[k];

        for (int32_t e = s->frd.at[v]; e < s->frd.at[v + 1]; e++) {
            s->fstamp[s->frd.to[e]] = s->epoch;
            s->flast[s->frd.to[e]] = k;
        }
    }
    for (int32_t k = 0; k < nb; k++) {
        int32_t v = s->blk[k];

        for (int32_t e = s->fmk.at[v]; e < s->fmk.at[v + 1]; e++)
            cur += s->bytes[s->fmk.to[e]];
        peak = cur > peak ? cur : peak;
        for (int q = 0; q < 2; q++) {
            const struct csr *c = q ? &s->fmk : &s->frd;

            for (int32_t e = c->at[v]; e < c->at[v + 1]; e++) {
                int32_t b = c->to[e], o = s->owner[b];

                if (o < 0 || !IN_BLOCK(s, o) || KEPT(s, o))
                    continue;
                if ((s->fstamp[b] == s->epoch && s->flast[b] == k) ||
                    (q == 1 && s->fstamp[b] != s->epoch)) {
                    cur -= s->bytes[b];
                    s->fstamp[b] = s->epoch;
                    s->flast[b] = -1; /* freed */
                }
            }
        }
    }
    return peak;
}

/* Marks buffer b as live at the start of the backward phase (tracked or persisting). */
static void start_live(struct dp_sim *s, int32_t b, bool persist, size_t *cur)
{
    s->live[b] = true;
    s->persist[b] = persist;
    *cur += s->bytes[b];
}

/* The block's backward phase (recomputation, then backward): its peak above the
 * state, and the growth of the state (*dm). */
static size_t bwd_peak(struct dp_sim *s, int32_t i, int32_t j, int32_t nb, size_t *dm)
{
    const struct lsets *ls = s->ls;
    const uint64_t *bi = s->row_i, *bj = s->row_j; /* sets i and j (dp_sim_pair) */
    int32_t ns = 0;
    size_t cur = 0, peak = 0;

    for (int32_t k = 0; k < nb; k++)
        if (s->need[s->blk[k]] == s->epoch && !KEPT(s, s->blk[k]))
            s->steps[ns++] = 2 * s->blk[k];
    for (int32_t k = nb; k-- > 0;)
        if (s->tg->ops[s->d->op[s->blk[k]]].has_bwd)
            s->steps[ns++] = 2 * s->blk[k] + 1;
    /* last use of every buffer in the phase */
    for (int32_t q = 0; q < ns; q++) {
        int32_t v = s->steps[q] / 2;
        bool bwd = s->steps[q] & 1;

        for (int h = 0; h < 2; h++) {
            const struct csr *c = bwd ? (h ? &s->bmk : &s->brd) : (h ? &s->fmk : &s->frd);

            for (int32_t e = c->at[v]; e < c->at[v + 1]; e++) {
                int32_t b = c->to[e];

                if (s->stamp[b] != s->epoch) {
                    s->stamp[b] = s->epoch;
                    s->live[b] = s->persist[b] = false;
                }
                s->last[b] = q;
            }
        }
    }
    /* live at the start: values of ∂(L_i) no node of L_i reads, the block's kept
     * values (while the phase reads them), the gradients written by later blocks */
    *dm = 0;
    for (int32_t k = ls->bd_at[i]; k < ls->bd_at[i + 1]; k++)
        for (int32_t e = s->fmk.at[ls->bd[k]]; e < s->fmk.at[ls->bd[k] + 1]; e++) {
            int32_t b = s->fmk.to[e];

            if (read_in(s, b, bi))
                continue;
            if (read_in(s, b, bj))
                *dm += s->bytes[b];
            if (s->stamp[b] == s->epoch)
                start_live(s, b, false, &cur);
        }
    for (int32_t k = 0; k < nb; k++) {
        int32_t v = s->blk[k];

        for (int32_t e = s->fmk.at[v]; KEPT(s, v) && e < s->fmk.at[v + 1]; e++) {
            int32_t b = s->fmk.to[e];

            if (read_in(s, b, bj))
                *dm += s->bytes[b];
            if (s->stamp[b] == s->epoch)
                start_live(s, b, false, &cur);
        }
    }
    for (int32_t e = s->gi.at[j]; e < s->gi.at[j + 1]; e++) {
        int32_t g = s->gi.to[e];

        if (!IN_BLOCK(s, s->owner[g])) {
            if (s->stamp[g] != s->epoch) {
                s->stamp[g] = s->epoch;
                s->last[g] = -1;
            }
            start_live(s, g, true, &cur);
        } else if (s->stamp[g] == s->epoch) {
            start_live(s, g, false, &cur);
        }
    }
    for (int32_t q = 0; q < ns; q++) {
        int32_t v = s->steps[q] / 2;
        bool bwd = s->steps[q] & 1;
        const struct csr *mk = bwd ? &s->bmk : &s->fmk, *rd = bwd ? &s->brd : &s->frd;

        for (int32_t e = mk->at[v]; e < mk->at[v + 1]; e++) {
            int32_t b = mk->to[e];

            if (!s->live[b])
                start_live(s, b, !IN_BLOCK(s, s->owner[b]), &cur);
        }
        peak = cur > peak ? cur : peak;
        for (int h = 0; h < 2; h++)
            for (int32_t e = (h ? mk : rd)->at[v]; e < (h ? mk : rd)->at[v + 1]; e++) {
                int32_t b = (h ? mk : rd)->to[e];

                if (s->live[b] && !s->persist[b] && s->last[b] == q) {
                    s->live[b] = false;
                    cur -= s->bytes[b];
                }
            }
    }
    return peak;
}

/* dp_sim_pair (row: work out L_j's row where the rows are on and do not hold the pair)
 * and dp_sim_pair_one (the rows only when they hold it). */
static void pair_get(struct dp_sim *s, int32_t i, int32_t j, bool row, double *t, size_t *dm,
                     size_t *c)
{
    struct pair_memo *pm = s->memo && i < j ? &s->memo[(size_t)j * (size_t)(j - 1) / 2 +
                                                      (size_t)i] : NULL;
    int32_t nb;
    size_t f, b;

    if (pm && pm->c1) {
        *t = pm->t;
        *dm = pm->dm;
        *c = pm->c1 - 1;
        return;
    }
    if (dp_rows_pair(s, i, j, row, t, dm, c)) {
        if (pm)
            *pm = (struct pair_memo){*t, *dm, *c + 1};
        return;
    }
    s->epoch++;
    lsets_row(s->ls, i, s->row_i);
    lsets_row(s->ls, j, s->row_j);
    nb = block_nodes(s, s->row_i, s->row_j, t);
    f = s->pend[i] + fwd_peak(s, nb);
    b = bwd_peak(s, i, j, nb, dm);
    *c = f > b ? f : b;
    if (pm)
        *pm = (struct pair_memo){*t, *dm, *c + 1}; /* c < SIZE_MAX: a sum of buffers */
}

void dp_sim_pair(struct dp_sim *s, int32_t i, int32_t j, double *t, size_t *dm, size_t *c)
{
    pair_get(s, i, j, true, t, dm, c);
}

void dp_sim_pair_one(struct dp_sim *s, int32_t i, int32_t j, double *t, size_t *dm, size_t *c)
{
    pair_get(s, i, j, false, t, dm, c);
}
