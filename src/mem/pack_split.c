/*
 * pack_split.c - the packer's splits (small instances apart from the large ones, or in
 * their gaps) and its entry points; the passes and the search are pack.c's.
 */
#include "mem/pack_run.h"

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
        if ((st = pack_run(al, tmp + n_large, n - n_large, align, tmp + n_large, &e_small,
                           SEARCH_WORK, NULL, SIZE_MAX)))
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

/* Tries every split of `splits` whose threshold leaves both kinds. */
static remat_status pack_splits(const remat_allocator *al, struct instance *inst, size_t n,
                                size_t align, size_t load, size_t *end, int depth,
                                struct pack_memo *pm)
{
    struct instance *tmp = core_calloc(al, n, sizeof *tmp);
    size_t *from = core_calloc(al, n, sizeof *from), *fixed = core_calloc(al, n, sizeof *fixed);
    remat_status st = REMAT_OK;

    if (!tmp || !from || !fixed)
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    for (size_t q = 0; q < REMAT_ARRAY_LEN(splits) && !st && *end > load; q++) {
        size_t cut = load / splits[q].per, k = 0, n_large = 0;

        for (int small = 0; small < 2; small++) /* the large ones first */
            for (size_t i = 0; i < n; i++)
                if ((inst[i].bytes < cut) == (bool)small) {
                    from[k] = i;
                    tmp[k++] = inst[i];
                    n_large += !small;
                }
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

    for (int k = 0; k < pm.n; k++)
        core_free(al, pm.e[k].off, pm.e[k].n * sizeof *pm.e[k].off + 1);
    return st;
}

