/*
 * pack_pk.h - the packer's state (pack.c), shared with its search (pack_search.c). Not
 * public.
 */
#ifndef REMAT_PACK_PK_H
#define REMAT_PACK_PK_H

#include "mem/pack_run.h"

#define NONE SIZE_MAX

struct key {
    size_t k[3]; /* compared in turn, ascending */
    size_t i;
};

/* A node of the search: after the parent's placement at x (pidx pl), the instances
 * tried in turn by (minoff, pidx), the last (lo, lp) placed now as b. */
struct frame {
    size_t x, pl, mh; /* mh: the lowest minoff + size of an unplaced instance */
    size_t lo, lp, b; /* b: NONE when none is placed */
    size_t mark;      /* the undo log's length before b */
    bool tried;       /* (lo, lp) holds the last one tried */
};

/*
 * The packer over n instances. Times are ranks: the nu distinct first steps in
 * increasing order; an instance covers ranks [lo, hi) (the firsts within its lifetime),
 * and two instances overlap in time exactly when one covers the other's lo rank.
 * byfirst  instance indices by first step; at[r] the position in it of rank r's first
 *          instance, at[nu] = n
 * seg      a segment tree on the ranks (leaves ns + r): node v lists seg[sat[v] ..
 *          sat[v + 1]), the instances of nonzero size whose [lo, hi) covers its range
 *          but not its parent's; those live at rank r are the lists from leaf r up
 * load     on the same tree: the bytes live at each rank (leaves), subtree maxima
 * The search keeps for each instance minoff (the top of the placed ones it overlaps)
 * and pidx (its rank in a static order); for each rank tot, the bytes not yet placed
 * there, also in the max tree mt (with ad, what was added to whole subtrees); for each
 * tree node own, the lowest minoff of the unplaced instances it lists; and an undo log.
 */
struct pk {
    const struct instance *inst;
    const remat_allocator *al;
    size_t n, n_pos, nu, ns, bound, n_seg, best, work;
    size_t visits; /* FOR_OVERLAP's visits summed over the instances (pk_visits) */
    size_t *size, *lo, *hi, *byfirst, *at, *sat, *seg, *load;
    size_t *off, *best_off, *ord, *minoff, *pidx, *tot, *tag, *own, *stamp, *dirty, *mt, *ad;
    size_t *cnt; /* sort_spans' buckets */
    size_t n_nodes, n_dirty;
    bool oom;
    struct span *conf, *undo;
    struct key *keys;
    struct frame *fr;
    size_t n_undo, cap_undo;
};

/* Runs body with v set to each tree node of the rank range [l0, r0): its cover. */
#define FOR_COVER(p, l0, r0, v, body)                                                   \
    for (size_t l_ = (l0) + (p)->ns, r_ = (r0) + (p)->ns, v; l_ < r_; l_ >>= 1, r_ >>= 1) { \
        if ((l_ & 1) && ((v = l_++), true))                                             \
            body;                                                                       \
        if ((r_ & 1) && ((v = --r_), true))                                             \
            body;                                                                       \
    }

/* The instances FOR_OVERLAP visits for instance i: the work it counts. */
static inline size_t pk_visits(const struct pk *p, size_t i)
{
    size_t w = p->at[p->hi[i]] - p->at[p->lo[i] + 1];

    for (size_t v = p->lo[i] + p->ns; v >= 1; v >>= 1)
        w += p->sat[v + 1] - p->sat[v] + 1;
    return w;
}

/* Runs body with j set to each instance of nonzero size overlapping i (i excluded):
 * those live at i's first step, then those starting within its lifetime. Counts the
 * visits as work (pk_visits). */
#define FOR_OVERLAP(p, i, j, body)                                                      \
    do {                                                                                \
        (p)->work += pk_visits(p, i);                                                   \
        for (size_t v_ = (p)->lo[i] + (p)->ns; v_ >= 1; v_ >>= 1)                       \
            for (size_t k_ = (p)->sat[v_]; k_ < (p)->sat[v_ + 1]; k_++)                 \
                if ((j = (p)->seg[k_]) != (i))                                          \
                    body;                                                               \
        for (size_t k_ = (p)->at[(p)->lo[i] + 1]; k_ < (p)->at[(p)->hi[i]]; k_++)       \
            if ((p)->size[j = (p)->byfirst[k_]])                                        \
                body;                                                                   \
    } while (0)

/* The static orders, of the greedy passes and of the search's ties: the keys compared
 * in turn, largest first (index last). pk_orders[0 .. N_GREEDY) are the greedy passes',
 * [N_GREEDY .. SWEEP_ORDER) the search's, SWEEP_ORDER the sweep's (pack.c). */
enum order_key { KEY_SIZE, KEY_LENGTH, KEY_AREA, KEY_LOAD, KEY_START };

struct order {
    enum order_key key[3];
    bool first_fit; /* greedy passes: first fit, else best fit */
};

extern const struct order pk_orders[];
#define N_GREEDY 4
#define SWEEP_ORDER 7

/* Sorts the instances by the order o into ord (pk->keys as scratch). */
void pk_order(struct pk *p, const struct order *o, size_t *ord);
/* Keeps the offsets just made if they end lower than the best. */
void pk_keep(struct pk *p, size_t end);
/* The search for offsets within cap, until the work reaches `work`: true when found
 * (kept if best). pack_search.c. */
bool pk_solve(struct pk *p, size_t cap, size_t work);
/* A best packing above the bound with at most a few instances above it: those placed
 * again within it, displacing others (pack_repair.c); kept when it ends lower. */
void pk_repair(struct pk *p);

#endif
