/*
 * pack_run.h - the packer of pack.c as pack_split.c uses it (not public).
 */
#ifndef REMAT_PACK_RUN_H
#define REMAT_PACK_RUN_H

#include "mem/pack.h"

struct span {
    size_t lo, hi; /* bytes [lo, hi) */
};

/* The search's work per packing, in instance and rank visits (1-2 ns each). */
#define SEARCH_WORK ((size_t)60000000)

/*
 * Sets the offsets of dst (when not NULL) and *out to their end, else *out to the load.
 * fixed NULL: with give_up SIZE_MAX, the greedy passes, the mending (pk_repair) and the
 * search (within `work`); else the greedy passes alone, each cut a little past give_up,
 * and the mending, and
 * REMAT_ERR_INFEASIBLE (no message, dst unchanged) when none ends within it.
 * fixed set: one best-fit pass by size in which the instances with fixed[i] set keep
 * that offset (pk_fill).
 */
remat_status pack_run(const remat_allocator *al, const struct instance *inst, size_t n,
                      size_t align, struct instance *dst, size_t *out, size_t work,
                      const size_t *fixed, size_t give_up);

/*
 * The best-fit pass over instances in an order by first rank (ord: lo ascending), as a
 * sweep (pack_sweep.c): instance i covers ranks [lo[i], hi[i]) of nu, those of size 0
 * get offset 0. Sets off and returns the end, or NONE (SIZE_MAX) once it reaches cut or
 * when out of memory. The same offsets as pack.c's best-fit pass in that order.
 */
size_t pack_sweep(const remat_allocator *al, size_t n, size_t nu, const size_t *size,
                  const size_t *lo, const size_t *hi, const size_t *ord, size_t *off,
                  size_t cut);

/* Merged runs of bytes: sorted, disjoint and not touching (pack_occ.c). */
struct occ_runs {
    struct span *a;
    size_t n, cap;
};

/* The bytes taken by the placed instances, over a segment tree on nu ranks (ns leaves,
 * a power of two at least nu), for the passes (pack_occ.c). ok false: out of memory, or
 * not made; then nothing is kept and occ_fit answers SIZE_MAX. */
struct occ {
    const remat_allocator *al;
    size_t ns, nu, op, n_placed;
    struct occ_runs *own, *sub; /* per node */
    size_t *stamp;              /* per node: the last call that visited it */
    size_t *by_lo, *by_hi;      /* Fenwick trees: the placed ones by first and last rank */
    bool ok;
};

bool occ_init(struct occ *o, const remat_allocator *al, size_t ns, size_t nu);
void occ_fini(struct occ *o);
/* An instance covering ranks [lo, hi) (lo < hi) placed at bytes s. */
void occ_add(struct occ *o, size_t lo, size_t hi, struct span s);
/* How many placed instances cover a rank of [lo, hi). */
size_t occ_placed(const struct occ *o, size_t lo, size_t hi);
/* The most sorted lists the tree gathers for a range: about 2 log2(ns) cover nodes and
 * as many ancestors (ns below 2^64). */
#define OCC_LISTS (4 * 64)

/* Where an instance of a bytes (a > 0) covering ranks [lo, hi) goes among the placed
 * ones covering a rank of them: the lowest offset of the smallest gap between them that
 * holds it (first_fit: of the lowest such gap), else the top of them (0 when none); as
 * a scan of their spans sorted by offset would place it. SIZE_MAX when their runs
 * number more than max or when !o->ok. buf: room for 2 (max + 1) spans. */
size_t occ_fit(struct occ *o, size_t lo, size_t hi, size_t a, bool first_fit, size_t max,
               struct span *buf);

#endif
