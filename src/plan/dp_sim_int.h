/*
 * dp_sim_int.h - the inside of the DP's block model (dp_sim.h), shared by the walk of
 * one pair (dp_sim.c) and the incremental evaluation of a row of pairs (dp_sim_row.c).
 * Private to those two files.
 */
#ifndef REMAT_DP_SIM_INT_H
#define REMAT_DP_SIM_INT_H

#include "plan/dp_sim.h"

/* A growable CSR: rows appended in order. */
struct csr {
    int32_t *at, *to;
    size_t n_rows, n, cap;
};

struct pair_memo {
    double t;
    size_t dm, c1; /* c1: the charge plus 1; 0 until worked out */
};

/* A segment tree over [0, size) of int64 with range add and the largest entry at mx[1]
 * (mx of a node: its range's largest entry, ad: what was added to all of its range). */
struct seg {
    int64_t *mx, *ad;
    int32_t size, cap;         /* a power of two, at most cap (the arrays' 2 cap) */
};

/*
 * A row of pairs (L_i, L_j), j fixed, worked out as L_i steps down from L_j
 * (dp_sim_row.c): the block L_j \ L_i changes by the nodes between consecutive sets,
 * and what a node of the block contributes depends on j alone, so only the nodes that
 * enter or leave the block and the boundary of L_i are walked per pair.
 */
struct dp_rows {
    bool ok;                   /* the graph is one the row evaluation is exact for */
    bool on;                   /* dp_sim_pair uses it */
    int32_t j, lo, cur;        /* the row worked out (j -1: none), from set lo; at L_cur */
    int32_t epoch;
    uint64_t *bits;            /* L_j as dense words */
    int32_t *nst;              /* per node: flags valid (== epoch) */
    uint8_t *nfl;              /* per node: ROW_KEPT, ROW_NEED, ROW_IN */
    int32_t *gst;              /* per buffer: a gradient of gi[j] (== epoch) */
    int32_t base, ext;         /* the row's blocks lie in nodes [base, base + ext) */
    struct seg fw, bw;         /* the block's forward (by node), backward phase (by slot) */
    int64_t t;                 /* the block's recomputed cost (dp_sim.tq units) */
    size_t dm;                 /* the block's own part of the state's growth */
    int32_t steps;             /* the backward phase's steps */
    int32_t *tl, *tr;          /* a pair's own intervals (undone after it) */
    int64_t *tv;
    double *rt;                /* per set i of the row: its pair's quantities */
    size_t *rdm, *rc;
    int32_t *rst;              /* == epoch: worked out */
    struct csr ifrd, ibrd, ibmk; /* buffer -> nodes whose FWD reads, BWD reads, BWD makes it */
    struct csr gown;           /* node -> the gradient buffers it owns */
    struct csr svr;            /* node -> nodes whose backward saves a value it produces */
    struct csr bval, bgrad;    /* set -> ∂(L)'s values no node of L reads, ∂(L)'s
                                  gradients (build_bounds) */
};

struct dp_sim {
    const remat_tgraph *tg;
    const struct dag *d;
    const struct lsets *ls;
    const remat_allocator *al;
    int32_t nbuf;
    int32_t *owner;            /* buffer -> node owning it, -1 when not planned */
    size_t *bytes;             /* buffer -> bytes */
    int64_t *tq;               /* node -> its cost in units of tunit (sums exact in any
                                  order, so the walk and the rows agree to the bit) */
    double tunit;
    struct csr frd, fmk, brd, bmk; /* node -> FWD reads, FWD makes, BWD reads, BWD makes */
    struct csr rdr;            /* forward buffer -> nodes reading it */
    struct csr gi;             /* set -> gradients of L written by a backward outside L */
    size_t *pend;              /* set -> pend(L) */
    /* scratch, stamped by epoch */
    int32_t epoch;
    int32_t *stamp, *last, *fstamp, *flast; /* per buffer */
    bool *live, *persist;      /* per buffer, valid where stamp == epoch */
    int32_t *nstamp, *kstamp, *need; /* per node: in the block, kept, needed */
    int32_t *blk, *steps;      /* the block's nodes; its backward phase's steps */
    uint64_t *row_i, *row_j;   /* the pair's two sets as dense rows (lsets_row) */
    /* pair (i, j), i < j, at j (j - 1) / 2 + i: its quantities once worked out (the DP
     * asks for the same pairs at each budget of its searches, twenty runs and more);
     * NULL past MEMO_SETS sets */
    struct pair_memo *memo;
    size_t n_memo;
    struct dp_rows rows;
};

bool dp_csr_push(const remat_allocator *a, struct csr *c, int32_t x);
void dp_csr_row(struct csr *c, size_t r);
bool dp_csr_init(const remat_allocator *a, struct csr *c, size_t rows);
void dp_csr_fini(const remat_allocator *a, struct csr *c);

/* The row evaluation's tables (false: out of memory; rows.ok false where the graph is
 * not one it is exact for), and their release. */
bool dp_rows_init(struct dp_sim *s);
void dp_rows_fini(struct dp_sim *s);
/* The pair (i, j) from the rows (with run, L_j's row worked out from i when they do not
 * hold it); false when they are off or do not give it. */
bool dp_rows_pair(struct dp_sim *s, int32_t i, int32_t j, bool run, double *t, size_t *dm,
                  size_t *c);

#endif
