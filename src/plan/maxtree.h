/*
 * maxtree.h - an array of byte counts under range additions, answering the largest value
 * of a range and the first (last) index of a range whose value passes a threshold, each
 * in O(log n): the host tier's timeline of live bytes (offload.c), where a gap is taken
 * back or narrowed one step at a time against the target.
 */
#ifndef REMAT_MAXTREE_H
#define REMAT_MAXTREE_H

#include "core/core.h"

#include <stddef.h>

struct maxtree {
    size_t n;
    size_t *v;   /* the caller's array: a leaf's values, less its and its ancestors' adds */
    size_t *mx;  /* per node: its add plus the largest value under it less its ancestors' */
    size_t *add; /* per node: added to every index under it */
    const remat_allocator *al;
};

#define MAXTREE_NONE ((size_t)-1)

/* The tree of v[0 .. n-1], which it keeps and changes (read values with maxtree_get). */
remat_status maxtree_init(struct maxtree *t, const remat_allocator *a, size_t *v, size_t n);
void maxtree_fini(struct maxtree *t);
/* Every value into the caller's array (v[i] is then value i; the tree goes on). */
void maxtree_flush(struct maxtree *t);
/* Value i. */
size_t maxtree_get(const struct maxtree *t, size_t i);
/* v[l .. r-1] += d. */
void maxtree_add(struct maxtree *t, size_t l, size_t r, size_t d);
/* The largest of v[l .. r-1]; 0 where the range is empty. */
size_t maxtree_max(const struct maxtree *t, size_t l, size_t r);
/* The first (last) i in [l, r) with v[i] > thr; MAXTREE_NONE where there is none. */
size_t maxtree_first_above(const struct maxtree *t, size_t l, size_t r, size_t thr);
size_t maxtree_last_above(const struct maxtree *t, size_t l, size_t r, size_t thr);

#endif
