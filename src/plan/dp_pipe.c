/*
 * dp_pipe.c - a beam run on two threads (kusumoto.c's dp_run; dp_pipe.h).
 *
 * A beam run's sets are small (GPT-2-1000 at 2% of the way from its least budget to
 * `none`'s peak: about 20 us and 300 pairs each), too small to hand over one by one, so
 * the two threads work as a pipeline. A set j whose pairs start from more than
 * PIPE_SPAN sets is cut at the middle one, from: the helper relaxes the pairs from the
 * sets before it into candidates of its own as soon as the caller has finished those
 * sets, and hands their frontier over; the caller relaxes the rest, merges the
 * helper's frontier and goes on with the set as before (closing, trimming, finishing
 * states). The helper so runs up to PIPE_RING sets ahead of the caller.
 *
 * The states are the one-thread run's: the frontier of the union of two candidate sets
 * is that of the union of one and the other's frontier (a candidate beaten by one of its
 * own side is beaten in the union), and on a tie in t and m the helper's candidate, whose
 * pair comes first, wins, as in the one-thread order. The helper prunes by the bound it
 * read when it began the set; where the caller's has fallen since (a guide finished a
 * state: kusumoto.c), the caller keeps only the helper's states within its own bound,
 * which is a test on each state (its overhead, and D t + m against each Lagrangian
 * limit) that every state beating one it passes passes too, so filtering the frontier is
 * the frontier of the filtered candidates. Where overheads were clamped to the last unit
 * (the test needs them whole) or the frontier passes PIPE_CAP states, the caller works
 * the set out alone.
 */
#include "plan/dp_pipe.h"

#include <sched.h>
#include <stdatomic.h>

/* Rows spanning fewer sets stay the caller's; the eighths of a row's sets (from its
 * first start) whose pairs are the helper's: the caller also closes, trims and finishes
 * each set (GPT-2-1000 at 2%: the beam run 0.57 s on one thread, 0.43 s with half the
 * sets' pairs the helper's, 0.40 s with 5/8, 0.45 s with 6/8); the sets the helper may
 * run ahead; the states a row's hand-over holds. */
#define PIPE_SPAN 64
#define PIPE_PART 5
#define PIPE_RING 64
#define PIPE_CAP 1024
#define WAIT_SPINS (1 << 14)

struct pipe_slot {
    int32_t n;      /* states handed over; -1: past PIPE_CAP */
    int32_t ub;     /* the bound the helper's part ran at */
    bool clamp;     /* its overheads were clamped to the last unit */
    struct point pt[PIPE_CAP];
};

struct dp_pipe {
    struct dp *p;
    core_team *team;
    struct dp_acc b;          /* the helper's candidates (best, par of its own) */
    struct point *out;        /* its frontier of a row: n_t + 1 */
    struct pipe_slot *slot;   /* PIPE_RING */
    atomic_int a_done;        /* the caller has finished sets 0 .. a_done - 1 */
    atomic_int b_done;        /* the helper has handed over rows up to b_done - 1 */
    atomic_int ub;            /* the caller's bound after its last set */
    atomic_bool stop;
    int32_t piped, redone;
};

/* One turn of a wait for the other thread: a pause, and after many the core given up
 * (the other may be off its core). */
static void wait_turn(int *spins)
{
    if (++*spins < WAIT_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

struct dp_pipe *dp_pipe_new(struct dp *p, const struct dp_acc *a)
{
    size_t nt = (size_t)p->n_t + 1;
    struct dp_pipe *q;

    if (core_par_threads_with(p->al) < 2 || !p->pc.p || p->rec || p->max_pts || p->beam <= 0)
        return NULL;
    if (!(q = core_calloc(p->al, 1, sizeof *q)))
        return NULL;
    q->p = p;
    q->b = *a;
    q->b.best = core_alloc(p->al, nt * sizeof *q->b.best);
    q->b.par = core_calloc(p->al, nt, sizeof *q->b.par);
    q->out = core_alloc(p->al, nt * sizeof *q->out);
    q->slot = core_alloc(p->al, PIPE_RING * sizeof *q->slot);
    atomic_init(&q->a_done, 1); /* ∅ */
    atomic_init(&q->b_done, 0);
    atomic_init(&q->ub, a->ub);
    atomic_init(&q->stop, false);
    if (!q->b.best || !q->b.par || !q->out || !q->slot || !(q->team = core_team_start())) {
        dp_pipe_free(q);
        return NULL;
    }
    for (size_t t = 0; t < nt; t++)
        q->b.best[t] = SIZE_MAX;
    return q;
}

void dp_pipe_free(struct dp_pipe *q)
{
    size_t nt;
    const remat_allocator *al;

    if (!q)
        return;
    nt = (size_t)q->p->n_t + 1;
    al = q->p->al;
    core_team_stop(q->team);
    core_free(al, q->b.best, nt * sizeof *q->b.best);
    core_free(al, q->b.par, nt * sizeof *q->b.par);
    core_free(al, q->out, nt * sizeof *q->out);
    core_free(al, q->slot, PIPE_RING * sizeof *q->slot);
    core_free(al, q, sizeof *q);
}

core_team *dp_pipe_team(const struct dp_pipe *q)
{
    return q->team;
}

void dp_pipe_counts(const struct dp_pipe *q, int32_t *piped, int32_t *redone)
{
    *piped = q->piped;
    *redone = q->redone;
}

int32_t dp_pipe_from(const struct dp_pipe *q, int32_t j)
{
    int32_t fs = first_start(q->p, j);

    return j < q->p->ls->n - 1 && j - fs >= PIPE_SPAN ? fs + (j - fs) / 8 * PIPE_PART : 0;
}

/* Whether row j's overheads may be clamped at bound ub (relax: the cut at ub - lb(L_j)
 * reaches the last unit). */
static bool clamps(const struct dp *p, const struct dp_acc *a, int32_t ub, int32_t j)
{
    return !a->lb || (int64_t)ub - a->lb[j] >= p->n_t - 1;
}

void dp_pipe_help(struct dp_pipe *q)
{
    struct dp *p = q->p;
    struct dp_acc *b = &q->b;
    int32_t n = p->ls->n;

    for (int32_t j = 1; j < n - 1; j++) {
        int32_t from = dp_pipe_from(q, j), need = j - PIPE_RING + 1, i, dt;
        struct pipe_slot *s = &q->slot[j % PIPE_RING];
        struct pair_it it;
        size_t dm, c, run = SIZE_MAX;
        int32_t k = 0;
        int spins = 0;

        if (!from)
            continue;
        need = need > from ? need : from; /* the sets it reads; its slot read */
        while (atomic_load_explicit(&q->a_done, memory_order_acquire) < need)
            if (atomic_load_explicit(&q->stop, memory_order_relaxed))
                return;
            else
                wait_turn(&spins);
        b->ub = atomic_load_explicit(&q->ub, memory_order_relaxed);
        b->any = false;
        b->t_lo = INT32_MAX;
        b->t_hi = -1;
        pairs_begin(p, j, true, &it);
        for (size_t lo = it.e, hi = it.end; lo < hi;) { /* its pairs only: the later */
            size_t mid = lo + (hi - lo) / 2;            /* sets are the caller's to write */

            if (p->pc.p[mid].i < from)
                lo = mid + 1;
            else
                it.end = hi = mid;
        }
        while (pairs_next(p, &it, &i, &dt, &dm, &c))
            relax(p, b, i, j, dt, dm, c);
        for (int32_t t = b->t_lo; b->any && t <= b->t_hi; t++) { /* the frontier */
            if (b->best[t] < run) {
                run = b->best[t];
                if (k < PIPE_CAP)
                    s->pt[k] = (struct point){b->best[t], t, b->par[t]};
                k++;
            }
            b->best[t] = SIZE_MAX;
        }
        s->n = k <= PIPE_CAP ? k : -1;
        s->ub = b->ub;
        s->clamp = clamps(p, b, b->ub, j);
        atomic_store_explicit(&q->b_done, j + 1, memory_order_release);
    }
}

/* Whether the state (t, m) at L_j passes a's bound (relax's tests as on the state
 * carried: its overhead within ub - lb(L_j), D t + m within D ub + B - P_D(L_j) at each
 * D). */
static bool within(const struct dp *p, const struct dp_acc *a, int32_t j, const struct point *x)
{
    int64_t key = p->lag_d * (int64_t)x->t + (int64_t)x->m;

    if (a->lb && (int64_t)x->t > (int64_t)a->ub - a->lb[j])
        return false;
    if (!p->lag)
        return true;
    if (key > p->lag_d * (int64_t)a->ub + (int64_t)p->budget - p->lag[j])
        return false;
    for (int e = 0; e < p->n_lagx; e++)
        if (p->lag_dx[e] * (int64_t)x->t + (int64_t)x->m >
            p->lag_dx[e] * (int64_t)a->ub + (int64_t)p->budget - p->lagx[e][j])
            return false;
    return true;
}

bool dp_pipe_merge(struct dp_pipe *q, struct dp_acc *a, int32_t j)
{
    const struct dp *p = q->p;
    const struct pipe_slot *s = &q->slot[j % PIPE_RING];
    bool filter;
    int spins = 0;

    while (atomic_load_explicit(&q->b_done, memory_order_acquire) <= j)
        wait_turn(&spins);
    q->piped++;
    filter = s->ub != a->ub;
    if (s->n < 0 || (filter && (s->clamp || clamps(p, a, a->ub, j)))) {
        q->redone++;
        return false;
    }
    for (int32_t k = 0; k < s->n; k++) {
        const struct point *x = &s->pt[k];

        if ((filter && !within(p, a, j, x)) || x->m > a->best[x->t])
            continue;
        a->best[x->t] = x->m; /* on a tie the helper's: its pair came first */
        a->par[x->t] = x->parent;
        a->any = true;
        a->t_lo = x->t < a->t_lo ? x->t : a->t_lo;
        a->t_hi = x->t > a->t_hi ? x->t : a->t_hi;
    }
    return true;
}

void dp_pipe_publish(struct dp_pipe *q, int32_t j, int32_t ub)
{
    atomic_store_explicit(&q->ub, ub, memory_order_relaxed);
    atomic_store_explicit(&q->a_done, j + 1, memory_order_release);
}

void dp_pipe_stop(struct dp_pipe *q)
{
    atomic_store_explicit(&q->stop, true, memory_order_relaxed);
}
