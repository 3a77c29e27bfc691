/*
 * hybrid_fit.c - a recomputation plan fitted to an activation budget, one more plan for
 * hybrid to start from at a given budget.
 *
 * The forward values are ordered by what recomputing them costs per byte they free
 * (their FLOPs over their bytes; views, which free nothing, stay). The plan drops the
 * cheapest k of them, k the least whose plan (lowered as SuperNeurons' keep sets are:
 * each dropped value recomputed once before the backward that reads it) fits the
 * budget, found by bisection; then, most expensive first, it takes back each dropped
 * value whose return still fits. On a transformer this lands on what Megatron's
 * selective recomputation does by hand (the attention's scores and softmax go first,
 * being large and cheap) and spends what budget is left on keeping some of them.
 *
 * Cost: about log2(n) + MAX_BACK lowerings and simulations (a few milliseconds each on
 * GPT-2 small's 451 ops; fewer taken back on large graphs: 4 on ResNet-1001).
 */
#include "plan/planners.h"

#include <math.h>
#include <stdlib.h>

/* The most values taken back one by one: MAX_BACK, fewer on large graphs (about
 * BACK_WORK nodes lowered in all). */
#define MAX_BACK 48
#define BACK_WORK 20000

struct fit {
    const remat_tgraph *tg;
    struct dag d;
    int32_t *order;  /* droppable nodes, cheapest per byte first */
    int32_t n;       /* their count */
    bool *kept;
};

static const struct dag *sort_dag; /* qsort's context (planning is not reentrant here) */

static double ratio_of(const struct dag *d, int32_t v)
{
    return d->t[v] / (double)d->m[v];
}

static int cmp_node(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    double rx = ratio_of(sort_dag, x), ry = ratio_of(sort_dag, y);

    return rx < ry ? -1 : rx > ry ? 1 : (x > y) - (x < y);
}

/* The plan keeping f->kept and its simulated peak (SIZE_MAX when it fails). */
static remat_status lower(struct fit *f, remat_schedule **s, size_t *peak)
{
    remat_status st;

    *peak = SIZE_MAX;
    if ((st = lower_keep(f->tg, &f->d, f->kept, false, s)) || (st = planner_finish(f->tg, s)) ||
        (st = planner_sim_peak(f->tg, *s, peak))) {
        remat_schedule_free(*s);
        *s = NULL;
    }
    return st;
}

/* The peak with the cheapest k dropped. */
static remat_status peak_dropping(struct fit *f, int32_t k, size_t *peak)
{
    remat_schedule *s = NULL;
    remat_status st;

    for (int32_t i = 0; i < f->n; i++)
        f->kept[f->order[i]] = i >= k;
    st = lower(f, &s, peak);
    remat_schedule_free(s);
    return st;
}

/* The least k that fits target (f->n + 1 when none does). */
static remat_status least_k(struct fit *f, size_t target, int32_t *k)
{
    int32_t lo = 0, hi = f->n;
    size_t peak;
    remat_status st;

    if ((st = peak_dropping(f, f->n, &peak)))
        return st;
    if (peak > target) {
        *k = f->n + 1;
        return REMAT_OK;
    }
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;

        if ((st = peak_dropping(f, mid, &peak)))
            return st;
        if (peak <= target)
            hi = mid;
        else
            lo = mid + 1;
    }
    *k = lo;
    return REMAT_OK;
}

/* Takes back dropped values, most expensive per byte first, while the plan fits. */
static remat_status take_back(struct fit *f, int32_t k, size_t target, remat_schedule **out)
{
    remat_schedule *s = NULL;
    int32_t max = BACK_WORK / (f->d.n ? f->d.n : 1);
    size_t peak;
    remat_status st;

    for (int32_t i = 0; i < f->n; i++)
        f->kept[f->order[i]] = i >= k;
    if ((st = lower(f, out, &peak)))
        return st;
    max = max < 4 ? 4 : max > MAX_BACK ? MAX_BACK : max;
    for (int32_t i = k - 1, tries = 0; i >= 0 && tries < max; i--, tries++) {
        f->kept[f->order[i]] = true;
        if ((st = lower(f, &s, &peak)))
            return st;
        if (peak <= target) {
            remat_schedule_free(*out);
            *out = s;
        } else {
            f->kept[f->order[i]] = false;
            remat_schedule_free(s);
        }
        s = NULL;
    }
    return REMAT_OK;
}

remat_status hybrid_fit(const remat_tgraph *tg, size_t target, remat_schedule **out)
{
    struct fit f = {.tg = tg};
    int32_t k = 0;
    remat_status st;

    *out = NULL;
    if ((st = dag_build(tg, &f.d)))
        return st;
    f.order = core_calloc(f.d.al, (size_t)f.d.n + 1, sizeof *f.order);
    f.kept = core_calloc(f.d.al, (size_t)f.d.n + 1, sizeof *f.kept);
    if (!f.order || !f.kept) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory planning");
        goto out;
    }
    for (int32_t v = 0; v < f.d.n; v++) {
        f.kept[v] = true;
        if (f.d.m[v])
            f.order[f.n++] = v;
    }
    sort_dag = &f.d;
    qsort(f.order, (size_t)f.n, sizeof *f.order, cmp_node);
    if (!(st = least_k(&f, target, &k)) && k <= f.n)
        st = take_back(&f, k, target, out);
out:
    core_free(f.d.al, f.order, sizeof *f.order * ((size_t)f.d.n + 1));
    core_free(f.d.al, f.kept, sizeof *f.kept * ((size_t)f.d.n + 1));
    dag_fini(&f.d);
    return st;
}
