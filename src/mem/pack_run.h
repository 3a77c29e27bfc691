/*
 * pack_run.h - the packer of pack.c as pack_split.c uses it (not public).
 */
#ifndef REMAT_PACK_RUN_H
#define REMAT_PACK_RUN_H

#include "mem/pack.h"

/* The search's work per packing, in instance and rank visits (1-2 ns each). */
#define SEARCH_WORK ((size_t)60000000)

/*
 * Sets the offsets of dst (when not NULL) and *out to their end, else *out to the load.
 * fixed NULL: with give_up SIZE_MAX, the greedy passes and the search (within `work`);
 * else the greedy passes alone, each cut where it passes give_up, and
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

#endif
