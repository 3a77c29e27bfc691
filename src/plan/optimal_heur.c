/*
 * optimal_heur.c - solutions of the `optimal` MILP found outside CBC (steps 2 and 3 of
 * "Solving" at the top of optimal.c): a solution is first a wish list of kept values
 * (S), which opt_complete turns into one (what each stage must run) and optimal_trim
 * cleans up; candidates are measured by the MILP's own accounting (optimal_account) and
 * the best that fits the budget is kept in struct best. The candidates: keep sets (the
 * nodes dearest to recompute per byte, every k-th node), each other node dropped after
 * the backward that needs it or cached; a local search over each node's choice and swaps
 * of kept nodes; and the LP relaxation's kept values rounded at several thresholds.
 *
 * Sizes: a candidate is completed and measured in a few passes over every stage's nodes
 * and edges (ns <= 400 stages); the local search stops at its deadline (a quarter of the
 * time limit).
 */
#include "plan/optimal.h"

#include <string.h>

/* Above this many forward nodes, the keep sets are searched by bisection and a swap
 * pairs only nodes at most 8 apart in topological order. */
#define OPT_SCAN 300

void optimal_trim(const struct opt *o, bool *R, bool *S)
{
    int32_t nf = o->nf;

    for (int32_t s = o->ns; s-- > 0;) {
        bool *r = R + (size_t)s * nf, *sv = S + (size_t)s * nf;
        const bool *nx = s + 1 < o->ns ? S + (size_t)(s + 1) * nf : NULL;

        for (int32_t i = nf; i-- > 0;) {
            bool used = (nx && nx[i]) || (s >= nf && optimal_bwd_reads(o, s - nf, i));

            for (int32_t e = o->us_at[i]; e < o->us_at[i + 1] && !used; e++)
                used = r[o->us[e]];
            if (r[i] && !optimal_is_fixed(o, s, i) && !used)
                r[i] = false;
            if (sv[i] && !used)
                sv[i] = false;
        }
    }
}

/*
 * Turns wishes of kept values (S, which it completes) into a solution: each stage runs
 * its own node or backward, what it must hand on to the next stage and is not already
 * kept, and whatever those read that is not kept. A node i with cache[i] that a
 * backward stage recomputes is also kept for later stages (cache NULL: none). Then
 * optimal_trim.
 */
static void opt_complete(const struct opt *o, bool *R, bool *S, const bool *cache)
{
    int32_t nf = o->nf;

    memset(R, 0, sizeof *R * (size_t)o->ns * (size_t)nf);
    for (int32_t s = 0; s < o->ns; s++) {
        bool *r = R + (size_t)s * nf, *sv = S + (size_t)s * nf;
        bool *nx = s + 1 < o->ns ? S + (size_t)(s + 1) * nf : NULL;

        if (s < nf)
            r[s] = true;
        else
            for (int32_t e = o->br_at[s - nf]; e < o->br_at[s - nf + 1]; e++)
                r[o->br[e]] = !sv[o->br[e]];
        for (int32_t i = 0; nx && i < nf; i++)
            r[i] = r[i] || (nx[i] && !sv[i]);
        for (int32_t j = nf; j-- > 0;)
            for (int32_t e = o->rd_at[j]; r[j] && e < o->rd_at[j + 1]; e++)
                r[o->rd[e]] = r[o->rd[e]] || !sv[o->rd[e]];
        for (int32_t i = 0; cache && nx && i < nf; i++)
            nx[i] = nx[i] || (r[i] && cache[i] && optimal_has_s(o, s + 1, i));
    }
    optimal_trim(o, R, S);
}

double optimal_cost(const struct opt *o, const bool *R)
{
    double c = 0;

    for (int32_t s = 0; s < o->ns; s++)
        for (int32_t i = 0; i < o->nf; i++)
            c += R[(size_t)s * o->nf + i] && !optimal_is_fixed(o, s, i) ? o->t[i] : 0;
    return c;
}

/* What a heuristic does with a node's value after the forward pass. */
enum { M_DROP, M_KEEP, M_CACHE, M_COUNT };

/* Completes the wishes in b->sc and keeps the result when it fits and costs less. */
static bool offer(const struct opt *o, struct best *b, const bool *cache)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;
    double c;

    opt_complete(o, b->rc, b->sc, cache);
    b->peak = optimal_account(o, b->rc, b->sc);
    if (b->peak > b->budget)
        return false;
    c = optimal_cost(o, b->rc);
    if (b->found && c >= b->cost)
        return false;
    memcpy(b->R, b->rc, sizeof *b->R * cells);
    memcpy(b->S, b->sc, sizeof *b->S * cells);
    b->cost = c;
    b->found = true;
    return true;
}

/* The solution of the modes in b->mode: a value is kept while forward readers need it;
 * after that, until its last reader (M_KEEP), or recomputed when needed and then
 * dropped after the stage (M_DROP) or kept for later ones (M_CACHE). */
static bool offer_modes(const struct opt *o, struct best *b)
{
    for (int32_t i = 0; i < o->nf; i++) {
        int32_t fwd = -1; /* the last forward reader */

        b->cache[i] = b->mode[i] == M_CACHE;
        for (int32_t e = o->us_at[i]; e < o->us_at[i + 1]; e++)
            fwd = o->us[e] > fwd ? o->us[e] : fwd;
        for (int32_t s = 0; s < o->ns; s++)
            b->sc[(size_t)s * o->nf + i] = optimal_has_s(o, s, i) &&
                (s <= fwd || (b->mode[i] == M_KEEP && s <= o->last_use[i]));
    }
    if (!offer(o, b, b->cache))
        return false;
    memcpy(b->best_mode, b->mode, sizeof *b->mode * (size_t)o->nf);
    return true;
}

void optimal_order(const struct opt *o, int32_t *order)
{
    for (int32_t i = 0; i < o->nf; i++)
        order[i] = i;
    for (int32_t i = 1; i < o->nf; i++) /* insertion sort */
        for (int32_t j = i; j > 0; j--) {
            int32_t x = order[j - 1], y = order[j];
            double rx = o->t[x] / (double)(o->mk[x] + 1), ry = o->t[y] / (double)(o->mk[y] + 1);

            if (rx >= ry)
                break;
            order[j - 1] = y;
            order[j] = x;
        }
}

void optimal_offer_keep(const struct opt *o, struct best *b, const bool *keep)
{
    for (uint8_t rest = M_DROP; rest <= M_CACHE; rest += M_CACHE - M_DROP) {
        for (int32_t i = 0; i < o->nf; i++)
            b->mode[i] = keep[i] ? M_KEEP : rest;
        offer_modes(o, b);
    }
}

/* Offers the keep set of kind `every` (true: every k-th node; false: the first k of
 * order), the others `rest`; whether its peak fits the budget. */
static bool offer_set(const struct opt *o, struct best *b, const int32_t *order, bool every,
                      int32_t k, uint8_t rest)
{
    memset(b->mode, rest, sizeof *b->mode * (size_t)o->nf);
    for (int32_t q = 0; q < o->nf; q++)
        if (every ? q % k == k - 1 : q < k)
            b->mode[every ? q : order[q]] = M_KEEP;
    offer_modes(o, b);
    return b->peak <= b->budget;
}

/*
 * The keep sets of one kind, k from lo to hi, the others `rest`. On large graphs
 * (above OPT_SCAN nodes) only a window around where they stop fitting, found by
 * bisection (the peak grows with what is kept: with k for prefixes, against k for
 * every k-th node), as each costs O(ns x nf).
 */
static void offer_sets(const struct opt *o, struct best *b, const int32_t *order, bool every,
                       uint8_t rest, double t_end)
{
    int32_t lo = every ? 2 : 0, hi = o->nf, a = lo, z = hi;

    if (o->nf > OPT_SCAN) {
        while (z - a > 1 && core_seconds() < t_end) { /* fits at one end, not the other */
            int32_t m = a + (z - a) / 2;

            if (offer_set(o, b, order, every, m, rest) != every)
                a = m;
            else
                z = m;
        }
        lo = a - OPT_SCAN / 20 > lo ? a - OPT_SCAN / 20 : lo;
        hi = a + OPT_SCAN / 20 < hi ? a + OPT_SCAN / 20 : hi;
    }
    for (int32_t k = lo; k <= hi && (k < lo + 2 || core_seconds() < t_end); k++)
        offer_set(o, b, order, every, k, rest);
}

void optimal_search(const struct opt *o, struct best *b, int32_t *order, double t_end)
{
    int32_t nf = o->nf, near = nf > OPT_SCAN ? 8 : nf;
    bool better = true;

    optimal_order(o, order);
    for (uint8_t rest = M_DROP; rest <= M_CACHE; rest += M_CACHE - M_DROP) {
        offer_sets(o, b, order, false, rest, t_end);
        offer_sets(o, b, order, true, rest, t_end);
    }
    while (b->found && better && core_seconds() < t_end) {
        better = false;
        for (int32_t q = 0; q < nf && core_seconds() < t_end; q++) {
            int32_t i = order[q];
            uint8_t was = b->best_mode[i];

            for (uint8_t m = 0; m < M_COUNT && b->best_mode[i] == was; m++) {
                memcpy(b->mode, b->best_mode, sizeof *b->mode * (size_t)nf);
                b->mode[i] = m;
                better = (m != was && offer_modes(o, b)) || better;
            }
            for (int32_t j = 0; j < nf && was != M_KEEP && b->best_mode[i] == was; j++) {
                if (b->best_mode[j] != M_KEEP || j < i - near || j > i + near)
                    continue;
                memcpy(b->mode, b->best_mode, sizeof *b->mode * (size_t)nf);
                b->mode[i] = M_KEEP; /* swap */
                b->mode[j] = was;
                better = offer_modes(o, b) || better;
            }
        }
    }
}

size_t optimal_least_peak(const struct opt *o, struct best *b, const int32_t *order,
                          double t_end)
{
    size_t least = SIZE_MAX;

    b->budget = 0; /* offer_modes completes the solution, and keeps none */
    for (int32_t f = 0; f <= 2 * o->nf && (f < 2 || core_seconds() < t_end); f++) {
        memset(b->mode, M_DROP, sizeof *b->mode * (size_t)o->nf);
        for (int32_t q = 0; q < f && f <= o->nf; q++) /* a prefix of order */
            b->mode[order[q]] = M_KEEP;
        for (int32_t i = 0, k = f - o->nf + 1; f > o->nf && i < o->nf; i++) /* every k-th */
            b->mode[i] = i % k == k - 1 ? M_KEEP : M_DROP;
        offer_modes(o, b);
        least = b->peak < least ? b->peak : least;
    }
    return least;
}

void optimal_round(const struct opt *o, struct best *b, const int *cs, const double *x)
{
    size_t cells = (size_t)o->ns * (size_t)o->nf;

    for (int32_t i = 0; i < o->nf; i++)
        b->cache[i] = true;
    for (int k = 0; k < 20; k++) {
        for (size_t q = 0; q < cells; q++)
            b->sc[q] = cs[q] && x[cs[q]] >= 0.05 * (k / 2) + 0.01;
        offer(o, b, k % 2 ? b->cache : NULL);
    }
}
