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

/* The large ones of every split, at every depth, are the instances of at least some
 * size in their first order: nested sets, each told by its count. Packed once per
 * (count, depth) in one layout_pack (a split's splits meet the same sets again; the
 * largest of ResNet-2498's hybrid plan four times): the offsets kept here. */
#define PACK_MEMO 16
struct pack_memo {
    struct pack_kept { size_t n, end, *off; int depth; } e[PACK_MEMO];
    int n;
};

static remat_status pack(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end, int depth, struct pack_memo *pm);

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
    if ((st = pack(al, tmp, n_large, align, end, depth, pm)) || pm->n == PACK_MEMO ||
        !(off = core_alloc(al, n_large * sizeof *off + 1)))
        return st; /* not kept (the memo full, or no memory): packed again if met again */
    for (size_t i = 0; i < n_large; i++)
        off[i] = tmp[i].offset;
    pm->e[pm->n++] = (struct pack_kept){n_large, *end, off, depth};
    return REMAT_OK;
}

/* One split: tmp holds the n_large large instances, then the small ones; their offsets
 * packed there (in tmp's order) and *e their end. */
static remat_status split_run(const remat_allocator *al, size_t n, size_t align,
                              struct instance *tmp, size_t n_large, bool fill, size_t *fixed,
                              size_t *e, int depth, struct pack_memo *pm)
{
    size_t e_large = 0, e_small = 0;
    remat_status st = pack_large(al, tmp, n_large, align, &e_large, depth + 1, pm);

    if (st)
        return st;
    if (fill) {
        for (size_t k = 0; k < n; k++)
            fixed[k] = k < n_large ? tmp[k].offset : NONE;
        return pack_run(al, tmp, n, align, tmp, e, 0, fixed, SIZE_MAX);
    }
    if ((st = pack_run(al, tmp + n_large, n - n_large, align, tmp + n_large, &e_small,
                       SEARCH_WORK, NULL, SIZE_MAX)))
        return st;
    for (size_t k = n_large; k < n; k++)
        tmp[k].offset += e_large;
    *e = e_large + e_small;
    return REMAT_OK;
}

/* A split's arrays: tmp (the large instances first, by threshold), from (tmp[k]'s index
 * in inst), fixed (split_run's scratch), its memo and its end once run. */
struct split_job {
    struct instance *tmp;
    size_t *from, *fixed, n_large, e;
    bool fill;
    struct pack_memo memo;
    struct core_job_err err;
};

/* Orders inst into j (large ones first) for the threshold cut; false when the split
 * leaves only one kind. */
static bool split_sort(const struct instance *inst, size_t n, size_t cut, struct split_job *j)
{
    size_t k = 0;

    j->n_large = 0;
    for (int small = 0; small < 2; small++) /* the large ones first */
        for (size_t i = 0; i < n; i++)
            if ((inst[i].bytes < cut) == (bool)small) {
                j->from[k] = i;
                j->tmp[k++] = inst[i];
                j->n_large += !small;
            }
    return j->n_large > 0 && j->n_large < n;
}

static void memo_fini(const remat_allocator *al, struct pack_memo *pm)
{
    for (int k = 0; k < pm->n; k++)
        core_free(al, pm->e[k].off, pm->e[k].n * sizeof *pm->e[k].off + 1);
    pm->n = 0;
}

/* The first-level splits side by side (pack_splits): each job on its own arrays and memo
 * (a memo only saves packing a set again: the offsets are the same either way). */
struct split_lanes {
    const remat_allocator *al;
    size_t n, align;
    struct split_job *job;
};

static void split_job_run(void *ctx, int q)
{
    struct split_lanes *l = ctx;
    struct split_job *j = &l->job[q];

    core_job_err_note(&j->err, split_run(l->al, l->n, l->align, j->tmp, j->n_large, j->fill,
                                         j->fixed, &j->e, 0, &j->memo));
}

/* Tries every split of `splits` whose threshold leaves both kinds, in order, each kept
 * where it ends lower, until one meets the load. The first level's (depth 0) run as jobs
 * on the cores when there are two or more; the result is the serial one. Each job packs
 * the sets of its own second level, which in one thread the later splits read from the
 * memo (the same sets, told by their counts), so two cores do about 1.9 times the work:
 * hybrid at `--budget min`, whose two packings are most of it, 0.92 -> 0.85 s on
 * ResNet-152 and 1.16 -> 0.95 s on DenseNet-121 (best of five). */
static remat_status pack_splits(const remat_allocator *al, struct instance *inst, size_t n,
                                size_t align, size_t load, size_t *end, int depth,
                                struct pack_memo *pm)
{
    enum { NS = REMAT_ARRAY_LEN(splits) };
    struct split_job job[NS];
    struct split_lanes l = {al, n, align, job};
    int threads = depth == 0 ? core_par_threads_with(al) : 1, n_job = 0, q = 0;
    remat_status st = REMAT_OK;

    memset(job, 0, sizeof job);
    for (int k = 0; k < (threads > 1 ? NS : 1) && !st; k++) {
        job[k].tmp = core_calloc(al, n, sizeof *job[k].tmp);
        job[k].from = core_calloc(al, n, sizeof *job[k].from);
        job[k].fixed = core_calloc(al, n, sizeof *job[k].fixed);
        if (!job[k].tmp || !job[k].from || !job[k].fixed)
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    }
    if (!st && threads > 1) {
        /* the splits that leave both kinds, each sorted into its own job */
        for (int k = 0; k < NS; k++) {
            struct split_job *j = &job[n_job];

            j->fill = splits[k].fill;
            n_job += split_sort(inst, n, load / splits[k].per, j);
        }
        core_par_run(n_job, threads, split_job_run, &l);
        for (int k = 0; k < n_job && !st; k++)
            st = core_job_err_raise(&job[k].err);
    }
    for (int k = 0; k < NS && !st && *end > load; k++) {
        struct split_job *j = &job[threads > 1 ? q : 0];
        size_t e = 0;

        if (threads > 1) { /* run: taken in order */
            if (q == n_job)
                break;
            e = job[q++].e;
        } else if (split_sort(inst, n, load / splits[k].per, j)) {
            j->fill = splits[k].fill;
            if ((st = split_run(al, n, align, j->tmp, j->n_large, j->fill, j->fixed, &e, depth,
                                pm)))
                break;
        } else {
            continue;
        }
        if (e < *end) {
            for (size_t i = 0; i < n; i++)
                inst[j->from[i]].offset = j->tmp[i].offset;
            *end = e;
        }
    }
    for (int k = 0; k < NS; k++) {
        core_free(al, job[k].tmp, n * sizeof *job[k].tmp);
        core_free(al, job[k].from, n * sizeof *job[k].from);
        core_free(al, job[k].fixed, n * sizeof *job[k].fixed);
        memo_fini(al, &job[k].memo);
        core_job_err_clear(&job[k].err);
    }
    return st;
}

/* The passes and the search; then, where they end above the load, the splits, whose
 * large ones are packed the same way (to SPLIT_DEPTH levels). */
#define SPLIT_DEPTH 2

static remat_status pack(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end, int depth, struct pack_memo *pm)
{
    size_t load = 0;
    remat_status st = pack_run(al, inst, n, align, inst, end, SEARCH_WORK, NULL, SIZE_MAX);

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
    remat_status st = pack(al, inst, n, align, end, 0, &pm);

    memo_fini(al, &pm);
    return st;
}

