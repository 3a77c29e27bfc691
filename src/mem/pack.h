/*
 * pack.h - dynamic storage allocation: offsets for instances of fixed lifetimes (in
 * steps) so that no two live at the same step overlap in address.
 */
#ifndef REMAT_PACK_H
#define REMAT_PACK_H

#include "core/core.h"

struct instance {
    int32_t buf;           /* -1: a step's scratch */
    size_t first, last;    /* steps: allocated at first, freed after last */
    size_t bytes;
    size_t offset;
};

/* Sets the offsets of n instances (first <= last and bytes set; sizes rounded up to
 * align) so that no two with overlapping lifetimes overlap; *end gets the highest end,
 * at least layout_load's. Deterministic (its search is bounded by work, not time): the
 * same instances give the same offsets. */
remat_status layout_pack(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end);
/*
 * Over PACK_QUICK_MIN instances, with give_up below SIZE_MAX: the quick packing, for a
 * caller that has a better use for a packing that ends above give_up (mem/relocate.h):
 * the greedy passes alone (no search, no splits), each abandoned once it ends above
 * give_up; REMAT_ERR_INFEASIBLE (no message, the offsets unset) when none ends within.
 * Otherwise layout_pack. The passes grow as k c log c for k instances each overlapping
 * c others, and the search and the splits repeat them: on the deepest plans (10^4 to
 * 10^5 instances, most of them far from the load) they took seconds to end above it.
 */
#define PACK_QUICK_MIN 10000
remat_status layout_pack_within(const remat_allocator *al, struct instance *inst, size_t n,
                                size_t align, size_t give_up, size_t *end);
/* The mending of a packing that ends above the load (pack_repair.c, which both calls
 * above use) alone, for tests: inst's offsets, a valid packing of sizes rounded up to
 * align, mended where that ends lower; *end gets their end. */
remat_status layout_mend(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end);
/* *load: the largest sum of sizes rounded up to align live at one step; no packing ends
 * lower. */
remat_status layout_load(const remat_allocator *al, const struct instance *inst, size_t n,
                         size_t align, size_t *load);

#endif
