/*
 * pack_split.c - the packer's splits (small instances apart from the large ones, or in
 * their gaps) and its entry points; the passes and the search are pack.c's.
 */
#include "mem/pack_run.h"

#include <string.h>

#define NONE SIZE_MAX

/*
 * Small instances (a few KiB to a few MiB of statistics, indices or narrow layers, often
 * long-lived and staggered) can pin the large ones' space apart. Two ways around, each
 * tried at a few size thresholds (1/per of the load) and kept where it ends lower:
 * - apart: the large ones packed alone (passes and search), the small ones packed alone
 *   above them (ResNet-50 b32, hybrid at its least budget: 1.041x the peak together,
 *   1.0015x apart);
 * - fill: the large ones packed alone, then the small ones by size into the gaps they
 *   leave (DenseNet-161 b32, hybrid at its least budget: 1.41x together, 1.18x so).
 * The large ones' packing gets a quarter of the search's work each time.
 */
static const struct {
    unsigned per;
    bool fill;
} splits[] = {{1000, false}, {300, true}, {100, true}, {30, true}};

/* The levels of splits: a split's large ones are split again once (pack). */
#define SPLIT_DEPTH 2

/* The large ones of every split, at every depth, are the instances of at least some
 * size in their first order: nested sets, each told by its count. Packed once per
 * (count, depth) in one layout_pack (a split's splits meet the same sets again; the
 * largest of ResNet-2498's hybrid plan four times): the offsets kept here. */
#define PACK_MEMO 16

/* A search (pack_run within SEARCH_WORK) worked out beforehand: of the large ones of a
 * set (large; told by their count n, as above), or of the small ones of a set of parent
 * instances (the sizes from one threshold up to another: told by both counts). */
struct pack_pre {
    size_t parent, n, end;
    bool large;
    struct instance *inst; /* the set, its offsets as searched */
};

#define PACK_PRE 48
struct pack_memo {
    struct pack_kept { size_t n, end, *off; int depth; } e[PACK_MEMO];
    int n;
    struct pack_pre pre[PACK_PRE]; /* filled before the splits, then only read */
    int n_pre;
};

static void memo_fini(const remat_allocator *al, struct pack_memo *pm)
{
    for (int k = 0; k < pm->n; k++)
        core_free(al, pm->e[k].off, pm->e[k].n * sizeof *pm->e[k].off + 1);
    for (int k = 0; k < pm->n_pre; k++)
        core_free(al, pm->pre[k].inst, pm->pre[k].n * sizeof *pm->pre[k].inst + 1);
    pm->n = pm->n_pre = 0;
}

static struct pack_pre *pre_find(struct pack_memo *pm, size_t parent, size_t n, bool large)
{
    for (int k = 0; pm && k < pm->n_pre; k++)
        if (pm->pre[k].n == n && pm->pre[k].large == large &&
            (large || pm->pre[k].parent == parent))
            return &pm->pre[k];
    return NULL;
}

/* The search on inst (n of them): worked out beforehand when the memo has it. */
static remat_status search(const remat_allocator *al, struct instance *inst, size_t n,
                           size_t align, size_t *end, struct pack_memo *pm, size_t parent,
                           bool large)
{
    const struct pack_pre *q = pre_find(pm, parent, n, large);

    if (!q)
        return pack_run(al, inst, n, align, inst, end, SEARCH_WORK, NULL, SIZE_MAX);
    for (size_t i = 0; i < n; i++)
        inst[i].offset = q->inst[i].offset;
    *end = q->end;
    return REMAT_OK;
}

static remat_status pack(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end, int depth, struct pack_memo *pm,
                         bool large);

/* pack on the n_large large ones of a split, through the memo. */
static remat_status pack_large(const remat_allocator *al, struct instance *tmp,
                               size_t n_large, size_t align, size_t *end, int depth,
                               struct pack_memo *pm)
{
    remat_status st;
    size_t *off;

    for (int k = 0; k < pm->n; k++)
        if (pm->e[k].n == n_large && pm->e[k].depth == depth) { /* met before */
            for (size_t i = 0; i < n_large; i++)
                tmp[i].offset = pm->e[k].off[i];
            *end = pm->e[k].end;
            return REMAT_OK;
        }
    if ((st = pack(al, tmp, n_large, align, end, depth, pm, true)) || pm->n == PACK_MEMO ||
        !(off = core_alloc(al, n_large * sizeof *off + 1)))
        return st; /* not kept (the memo full, or no memory): packed again if met again */
    for (size_t i = 0; i < n_large; i++)
        off[i] = tmp[i].offset;
    pm->e[pm->n++] = (struct pack_kept){n_large, *end, off, depth};
    return REMAT_OK;
}

/* One split: tmp holds the n_large large instances, then the small ones; from[k] is
 * tmp[k]'s index in inst. */
static remat_status pack_split(const remat_allocator *al, struct instance *inst, size_t n,
                               size_t align, struct instance *tmp, const size_t *from,
                               size_t n_large, bool fill, size_t *fixed, size_t *end,
                               int depth, struct pack_memo *pm)
{
    size_t e_large = 0, e_small = 0, e;
    remat_status st = pack_large(al, tmp, n_large, align, &e_large, depth + 1, pm);

    if (st)
        return st;
    if (fill) {
        for (size_t k = 0; k < n; k++)
            fixed[k] = k < n_large ? tmp[k].offset : NONE;
        if ((st = pack_run(al, tmp, n, align, tmp, &e, 0, fixed, SIZE_MAX)))
            return st;
    } else {
        if ((st = search(al, tmp + n_large, n - n_large, align, &e_small, pm, n, false)))
            return st;
        for (size_t k = n_large; k < n; k++)
            tmp[k].offset += e_large;
        e = e_large + e_small;
    }
    if (e < *end) {
        for (size_t k = 0; k < n; k++)
            inst[from[k]].offset = tmp[k].offset;
        *end = e;
    }
    return REMAT_OK;
}

/* Orders inst (n) into tmp, the ones of at least cut bytes first (from[k]: tmp[k]'s index
 * in inst); their count. */
static size_t split_sort(const struct instance *inst, size_t n, size_t cut,
                         struct instance *tmp, size_t *from)
{
    size_t k = 0, n_large = 0;

    for (int small = 0; small < 2; small++) /* the large ones first */
        for (size_t i = 0; i < n; i++)
            if ((inst[i].bytes < cut) == (bool)small) {
                from[k] = i;
                tmp[k++] = inst[i];
                n_large += !small;
            }
    return n_large;
}

/* Notes the search of set (n of them) as one to work out beforehand, a copy of it, unless
 * noted already or the list is full; false only when out of memory. */
static bool pre_add(const remat_allocator *al, struct pack_memo *pm, const struct instance *set,
                    size_t n, size_t parent, bool large)
{
    struct pack_pre *q;

    if (n == 0 || pre_find(pm, parent, n, large) || pm->n_pre == PACK_PRE)
        return true;
    q = &pm->pre[pm->n_pre];
    if (!(q->inst = core_alloc(al, n * sizeof *q->inst + 1)))
        return false;
    memcpy(q->inst, set, n * sizeof *set);
    q->n = n;
    q->parent = parent;
    q->large = large;
    q->end = 0;
    pm->n_pre++;
    return true;
}

/* Notes the sets of set's (n of them, in tmp) split at cut whose searches the split runs:
 * its large ones and, packed apart, its small ones (from: scratch); false only when out
 * of memory. */
static bool pre_split(const remat_allocator *al, struct pack_memo *pm,
                      const struct instance *set, size_t n, size_t cut, bool fill,
                      struct instance *tmp, size_t *from)
{
    size_t a = split_sort(set, n, cut, tmp, from);

    return a == 0 || a == n ||
           (pre_add(al, pm, tmp, a, n, true) &&
            (fill || pre_add(al, pm, tmp + a, n - a, n, false)));
}

struct pre_jobs {
    const remat_allocator *al;
    size_t align;
    struct pack_memo *pm;
    int first; /* the entries from here are this round's */
    struct core_job_err err[PACK_PRE];
};

static void pre_job(void *ctx, int k)
{
    struct pre_jobs *w = ctx;
    struct pack_pre *q = &w->pm->pre[w->first + k];

    core_job_err_note(&w->err[k], pack_run(w->al, q->inst, q->n, w->align, q->inst, &q->end,
                                           SEARCH_WORK, NULL, SIZE_MAX));
}

/* Runs the searches of the entries from first on, as jobs. */
static remat_status pre_run(struct pre_jobs *w, int first, int threads)
{
    remat_status st = REMAT_OK;
    int n = w->pm->n_pre - first;

    w->first = first;
    memset(w->err, 0, sizeof w->err);
    core_par_run(n, threads, pre_job, w);
    for (int k = 0; k < n; k++) {
        if (st)
            core_job_err_clear(&w->err[k]);
        else
            st = core_job_err_raise(&w->err[k]);
    }
    return st;
}

/*
 * The searches the splits below the first level will run, worked out beforehand as jobs
 * on the cores (each on its own copy of its set: the same offsets as the search the
 * splits would run there), in two rounds as the splits need them: the large ones of each
 * first-level split and the small ones packed apart; then, of each of those large sets
 * whose search ended above its load (so that its own splits run), its splits' sets. Only
 * what a first-level split after one that meets the load would have searched is done for
 * nothing. Nothing where there is one core, nor past PACK_QUICK_MIN instances (a copy of
 * each set is held while it runs: up to PACK_PRE of them, 125 MB at GPT-2-1000's 65,000
 * instances; the layouts of plans under a budget pack those quickly instead).
 */
static remat_status pre_search(const remat_allocator *al, const struct instance *inst,
                               size_t n, size_t align, size_t load, struct pack_memo *pm)
{
    struct pre_jobs w = {al, align, pm, 0, {{0}}};
    int threads = core_par_threads_with(al), ones;
    struct instance *tmp;
    size_t *from;
    remat_status st = REMAT_OK;

    if (threads < 2 || n > PACK_QUICK_MIN)
        return REMAT_OK;
    tmp = core_calloc(al, n, sizeof *tmp);
    from = core_calloc(al, n, sizeof *from);
    if (!tmp || !from)
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    for (size_t q = 0; q < REMAT_ARRAY_LEN(splits) && !st; q++)
        if (!pre_split(al, pm, inst, n, load / splits[q].per, splits[q].fill, tmp, from))
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    if (!st)
        st = pre_run(&w, 0, threads);
    ones = pm->n_pre;
    for (int k = 0; k < ones && !st && SPLIT_DEPTH > 1; k++) {
        const struct pack_pre *e = &pm->pre[k];
        size_t load_e = 0;

        if (!e->large ||
            (st = pack_run(al, e->inst, e->n, align, NULL, &load_e, 0, NULL, SIZE_MAX)) ||
            e->end <= load_e)
            continue;
        for (size_t r = 0; r < REMAT_ARRAY_LEN(splits) && !st; r++)
            if (!pre_split(al, pm, pm->pre[k].inst, pm->pre[k].n, load_e / splits[r].per,
                           splits[r].fill, tmp, from))
                st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    }
    if (!st && pm->n_pre > ones)
        st = pre_run(&w, ones, threads);
    core_free(al, tmp, n * sizeof *tmp);
    core_free(al, from, n * sizeof *from);
    return st;
}

/* Tries every split of `splits` whose threshold leaves both kinds. The searches of the
 * first level's splits and of theirs are worked out beforehand on the cores (pre_search:
 * the sets they meet, the large ones told by their counts as in the memo); the splits
 * then run as in one thread, reading them. */
static remat_status pack_splits(const remat_allocator *al, struct instance *inst, size_t n,
                                size_t align, size_t load, size_t *end, int depth,
                                struct pack_memo *pm)
{
    struct instance *tmp = core_calloc(al, n, sizeof *tmp);
    size_t *from = core_calloc(al, n, sizeof *from), *fixed = core_calloc(al, n, sizeof *fixed);
    remat_status st = REMAT_OK;

    if (!tmp || !from || !fixed)
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    if (!st && depth == 0)
        st = pre_search(al, inst, n, align, load, pm);
    for (size_t q = 0; q < REMAT_ARRAY_LEN(splits) && !st && *end > load; q++) {
        size_t n_large = split_sort(inst, n, load / splits[q].per, tmp, from);

        if (n_large > 0 && n_large < n)
            st = pack_split(al, inst, n, align, tmp, from, n_large, splits[q].fill, fixed,
                            end, depth, pm);
    }
    core_free(al, tmp, n * sizeof *tmp);
    core_free(al, from, n * sizeof *from);
    core_free(al, fixed, n * sizeof *fixed);
    return st;
}

/* The passes and the search; then, where they end above the load, the splits, whose
 * large ones are packed the same way (to SPLIT_DEPTH levels). */

static remat_status pack(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end, int depth, struct pack_memo *pm,
                         bool large)
{
    size_t load = 0;
    remat_status st = large ? search(al, inst, n, align, end, pm, 0, true)
                            : pack_run(al, inst, n, align, inst, end, SEARCH_WORK, NULL, SIZE_MAX);

    if (!st && depth < SPLIT_DEPTH &&
        !(st = pack_run(al, inst, n, align, NULL, &load, 0, NULL, SIZE_MAX)) &&
        *end > load)
        st = pack_splits(al, inst, n, align, load, end, depth, pm);
    return st;
}

remat_status layout_pack_within(const remat_allocator *al, struct instance *inst, size_t n,
                                size_t align, size_t give_up, size_t *end)
{
    if (n > PACK_QUICK_MIN && give_up != SIZE_MAX)
        return pack_run(al, inst, n, align, inst, end, 0, NULL, give_up);
    return layout_pack(al, inst, n, align, end);
}

remat_status layout_pack(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end)
{
    struct pack_memo pm = {.n = 0};
    remat_status st = pack(al, inst, n, align, end, 0, &pm, false);

    memo_fini(al, &pm);
    return st;
}

