/*
 * lowerset_thin.c - a coarser family of lower sets for large graphs (lsets_thin,
 * lowerset.h): in each run of sets of about the same M, the one of least boundary bytes.
 */
#include "plan/lowerset.h"

#include <string.h>

/* Copies set i of src to the end of out (its arrays sized for src's count). */
static void copy_set(const struct lsets *src, int32_t i, struct lsets *out)
{
    int32_t k = out->n++, nb = out->bd_at[k], nx = out->mx_at[k];
    const struct lrow *r = &src->row[i];

    out->row[k] = (struct lrow){out->bits_n, r->full, r->lead, r->len};
    if (r->len)
        memcpy(out->bits + out->bits_n, src->bits + r->at, sizeof *out->bits * (size_t)r->len);
    out->bits_n += (size_t)r->len;
    out->size[k] = src->size[i];
    out->m[k] = src->m[i];
    out->t[k] = src->t[i];
    out->m_out[k] = src->m_out[i];
    for (int32_t q = src->bd_at[i]; q < src->bd_at[i + 1]; q++)
        out->bd[nb++] = src->bd[q];
    for (int32_t q = src->mx_at[i]; q < src->mx_at[i + 1]; q++)
        out->mx[nx++] = src->mx[q];
    out->bd_at[k + 1] = nb;
    out->mx_at[k + 1] = nx;
}

/* M(∂(L_i)). */
static size_t cut_bytes(const struct dag *d, const struct lsets *ls, int32_t i)
{
    size_t m = 0;

    for (int32_t q = ls->bd_at[i]; q < ls->bd_at[i + 1]; q++)
        m += d->m[ls->bd[q]];
    return m;
}

/* The sets lsets_thin keeps: keep[i] (src->n entries) 1 for those, 0 for the rest. */
static void thin_keep(const struct dag *d, const struct lsets *src, int32_t max_sets,
                      uint8_t *keep)
{
    size_t step = src->m[src->n - 1] / (size_t)(max_sets - 2) + 1;
    int32_t best = -1;

    REMAT_ASSERT(src->by_m && max_sets > 2);
    memset(keep, 0, (size_t)src->n);
    keep[0] = keep[src->n - 1] = 1; /* ∅, V */
    for (int32_t i = 1; i < src->n - 1; i++) {
        if (best < 0 || cut_bytes(d, src, i) < cut_bytes(d, src, best))
            best = i;
        if (src->m[i + 1] / step != src->m[best] / step) { /* the run of best ends */
            keep[best] = 1;
            best = -1;
        }
    }
    if (best >= 0)
        keep[best] = 1;
}

void lsets_drops_keep(const struct dag *d, const struct lsets *src, uint8_t *keep)
{
    size_t prev = 0;

    memset(keep, 0, (size_t)src->n);
    keep[0] = keep[src->n - 1] = 1; /* ∅, V */
    for (int32_t i = 1; i < src->n - 1; i++) {
        size_t c = cut_bytes(d, src, i);

        keep[i] = c < prev; /* ∅'s boundary holds none: L_1 is not one */
        prev = c;
    }
}

remat_status lsets_pick(const struct lsets *src, const uint8_t *keep, struct lsets *out)
{
    const remat_allocator *a = src->al;
    size_t cap = (size_t)src->n + 1;

    REMAT_ASSERT(src->by_m && !src->sim && keep[0] && keep[src->n - 1]);
    memset(out, 0, sizeof *out);
    out->al = a;
    out->words = src->words;
    out->by_m = true;
    out->cap = cap;
    out->bd_cap = (size_t)src->bd_at[src->n] + 1;
    out->mx_cap = (size_t)src->mx_at[src->n] + 1;
    out->bits_cap = src->bits_n + 1; /* the rows picked are some of src's */
    out->bits = core_calloc(a, out->bits_cap, sizeof *out->bits);
    out->row = core_calloc(a, cap, sizeof *out->row);
    out->size = core_calloc(a, cap, sizeof *out->size);
    out->m = core_calloc(a, cap, sizeof *out->m);
    out->t = core_calloc(a, cap, sizeof *out->t);
    out->m_out = core_calloc(a, cap, sizeof *out->m_out);
    out->bd_at = core_calloc(a, cap + 1, sizeof *out->bd_at);
    out->bd = core_calloc(a, out->bd_cap, sizeof *out->bd);
    out->mx_at = core_calloc(a, cap + 1, sizeof *out->mx_at);
    out->mx = core_calloc(a, out->mx_cap, sizeof *out->mx);
    if (!out->bits || !out->row || !out->size || !out->m || !out->t || !out->m_out || !out->bd_at ||
        !out->bd || !out->mx_at || !out->mx) {
        lsets_fini(out);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory picking lower sets");
    }
    for (int32_t i = 0; i < src->n; i++)
        if (keep[i])
            copy_set(src, i, out);
    return REMAT_OK;
}

remat_status lsets_thin(const struct dag *d, const struct lsets *src, int32_t max_sets,
                        struct lsets *out)
{
    uint8_t *keep = core_alloc(src->al, (size_t)src->n);
    remat_status st;

    if (!keep)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory thinning lower sets");
    thin_keep(d, src, max_sets, keep);
    st = lsets_pick(src, keep, out);
    core_free(src->al, keep, (size_t)src->n);
    return st;
}
