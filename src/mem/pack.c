/*
 * pack.c - offsets for buffer instances of fixed lifetimes in one arena: dynamic storage
 * allocation (NP-hard), solved to the lower bound (the most bytes live at one step)
 * on most real schedules.
 *
 * Greedy passes first: best fit in order of first step, as a sweep (pack_sweep.c);
 * then by size with best fit, as TFLite's "greedy by size"; by size with first fit, the
 * former packer; by the load over the lifetime; by size times duration, each placing
 * an instance in the smallest gap among the placed ones it overlaps in time (read from
 * an occupancy tree where they are many: pack_occ.c). Then, when the best end is above
 * the bound, a depth-first search after MiniMalloc (Moffitt, ASPLOS 2023; pack_search.c)
 * for a packing within the bound, and if it fails within its work, within 1%, 3%, 5%,
 * 10% and 20% more. Where the result is still above the bound, the splits
 * (pack_split.c): small instances packed apart from the large ones, or into the large
 * ones' gaps.
 * Work: a greedy pass is O(k log k + k·c log c) for k instances each overlapping c
 * others in time (found through a segment tree on the steps, not by scanning); the
 * search visits O(k + c) per node and stops at SEARCH_WORK (about 0.1 s), counted in
 * visits so that the same instances always get the same offsets. 10^3 instances for
 * ResNet-50, 10^4-10^5 for the deepest networks (the first pass meets the bound).
 */
#include "mem/pack_pk.h"

#include <stdlib.h>
#include <string.h>

static int by_key(const void *x, const void *y)
{
    const struct key *a = x, *b = y;

    for (int j = 0; j < 3; j++)
        if (a->k[j] != b->k[j])
            return a->k[j] < b->k[j] ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Sorts c[0..m) by lo through tmp (m spans): insertion sort on runs of 16, then
 * bottom-up merges. */
static void merge_spans(struct span *c, struct span *tmp, size_t m)
{
    for (size_t r = 0; r < m; r += 16)
        for (size_t k = r + 1; k < m && k < r + 16; k++) {
            struct span x = c[k];
            size_t q = k;

            for (; q > r && c[q - 1].lo > x.lo; q--)
                c[q] = c[q - 1];
            c[q] = x;
        }
    for (size_t w = 16; w < m; w *= 2) {
        for (size_t l = 0; l < m; l += 2 * w) {
            size_t a = l, mid = l + w < m ? l + w : m, b = mid, e = l + 2 * w < m ? l + 2 * w : m;

            for (size_t k = l; k < e; k++)
                tmp[k] = b >= e || (a < mid && c[a].lo <= c[b].lo) ? c[a++] : c[b++];
        }
        memcpy(c, tmp, m * sizeof *c);
    }
}

/* Sorts c[0..m) by lo (spans of equal lo in any order: the passes' sweep does not tell
 * them apart), through tmp (m spans) and cnt (m + 1 counts), without qsort's call
 * per comparison (the greedy passes' hot loop, thousands of spans each on the deepest
 * plans): into at most m buckets of lo by its high bits, each then merged
 * (merge_spans; a few spans each where the offsets spread). */
static void sort_spans(struct span *c, struct span *tmp, size_t *cnt, size_t m)
{
    size_t least = SIZE_MAX, most = 0, nb, sh = 0;

    if (m <= 64) {
        merge_spans(c, tmp, m);
        return;
    }
    for (size_t k = 0; k < m; k++) {
        least = c[k].lo < least ? c[k].lo : least;
        most = c[k].lo > most ? c[k].lo : most;
    }
    if (least == most)
        return;
    while (((most - least) >> sh) >= m) /* then nb <= m buckets */
        sh++;
    nb = ((most - least) >> sh) + 1;
    memset(cnt, 0, (nb + 1) * sizeof *cnt);
    for (size_t k = 0; k < m; k++)
        cnt[((c[k].lo - least) >> sh) + 1]++;
    for (size_t b = 1; b <= nb; b++)
        cnt[b] += cnt[b - 1];
    for (size_t k = 0; k < m; k++) /* then cnt[b] ends bucket b */
        tmp[cnt[(c[k].lo - least) >> sh]++] = c[k];
    for (size_t b = 0, s = 0; b < nb; s = cnt[b++])
        if (cnt[b] - s > 1)
            merge_spans(tmp + s, c + s, cnt[b] - s);
    memcpy(c, tmp, m * sizeof *c);
}

/* Sorts 0..n-1 by keys[] (already filled) into out. */
static void sort_keys(struct pk *p, size_t *out)
{
    qsort(p->keys, p->n, sizeof *p->keys, by_key);
    for (size_t k = 0; k < p->n; k++)
        out[k] = p->keys[k].i;
}

/* Ranks, the cover lists (seg, allocated here) and the load tree. */
static remat_status pk_index(struct pk *p)
{
    size_t n = p->n, r = 0, total = 0;

    bool in_order = true; /* the layout's instances come by first step: no sort */

    for (size_t i = 1; i < n && in_order; i++)
        in_order = p->inst[i - 1].first <= p->inst[i].first;
    for (size_t i = 0; i < n && in_order; i++)
        p->byfirst[i] = i;
    for (size_t i = 0; i < n && !in_order; i++)
        p->keys[i] = (struct key){{p->inst[i].first, 0, 0}, i};
    if (!in_order)
        sort_keys(p, p->byfirst);
    for (size_t k = 0; k < n; k++) {
        size_t i = p->byfirst[k];

        if (k && p->inst[i].first != p->inst[p->byfirst[k - 1]].first)
            p->at[++r] = k;
        p->lo[i] = r;
    }
    p->nu = n ? r + 1 : 0;
    p->at[p->nu] = n;
    for (p->ns = 1; p->ns < p->nu; p->ns <<= 1)
        ; /* the arrays hold a tree on n leaves; one on nu is enough */
    for (size_t i = 0; i < n; i++) { /* hi: how many distinct firsts are <= last */
        size_t a = p->lo[i] + 1, b = p->nu;

        while (a < b) {
            size_t m = a + (b - a) / 2;

            if (p->inst[p->byfirst[p->at[m]]].first <= p->inst[i].last)
                a = m + 1;
            else
                b = m;
        }
        p->hi[i] = a;
    }
    for (size_t i = 0; i < n; i++) /* counts, then ends, then starts (sat[v] decreases) */
        if (p->size[i])
            FOR_COVER(p, p->lo[i], p->hi[i], v, p->sat[v]++);
    for (size_t v = 0; v < 2 * p->ns; v++)
        p->sat[v] = total += p->sat[v];
    p->sat[2 * p->ns] = p->n_seg = total;
    if (!(p->seg = core_calloc(p->al, total + 1, sizeof *p->seg)))
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    for (size_t i = n; i-- > 0;)
        if (p->size[i])
            FOR_COVER(p, p->lo[i], p->hi[i], v, p->seg[--p->sat[v]] = i);
    for (size_t i = 0; i < n; i++) /* load: each node the sum over its list, then down */
        FOR_COVER(p, p->lo[i], p->hi[i], v, p->load[v] += p->size[i]);
    for (size_t v = 2; v < 2 * p->ns; v++)
        p->load[v] += p->load[v >> 1];
    for (size_t v = p->ns; v-- > 1;) /* then up: the subtree maxima */
        p->load[v] = p->load[2 * v] > p->load[2 * v + 1] ? p->load[2 * v] : p->load[2 * v + 1];
    p->bound = p->load[1];
    for (size_t i = 0; i < n; i++)
        p->visits += p->size[i] ? pk_visits(p, i) : 0;
    return REMAT_OK;
}

/* The most bytes live at one step of instance i's lifetime. */
static size_t pk_load_over(const struct pk *p, size_t i)
{
    size_t m = 0;

    FOR_COVER(p, p->lo[i], p->hi[i], v, m = p->load[v] > m ? p->load[v] : m);
    return m;
}

/* ----------------------------------------------------- greedy passes (best fit) */

static struct span pk_span(const struct pk *p, size_t j)
{
    return (struct span){p->off[j], p->off[j] + p->size[j]};
}

/* Packings of fewer instances, or whose instances overlap fewer than OCC_VISITS others
 * on average, gather the placed ones they overlap one by one alone: the occupancy tree's
 * upkeep (its lists touched at every placement, and made and freed each pass) would cost
 * more than it saves. The passes side by side on GPT-2-1000's plans at their least
 * budgets (375 and 740-900 on average): 0.17-0.26 s with the tree at 0.29, 0.03-0.04
 * at 0.05-0.07; ResNet-2498's at its halfway budget (2,700): 0.6 s without it, 0.09 with
 * it. */
#define OCC_MIN 2048
#define OCC_VISITS 1024

/* The offset at which a pass places instance i (nonzero size): the lowest of the smallest
 * gap between the placed instances it overlaps that holds it (first: of the lowest such
 * gap), else above them. From the occupancy tree o where its runs are fewer than the
 * instances to visit one by one (the same bytes either way, so the same gaps), else by
 * gathering those and sorting their spans. */
static size_t pk_fit(struct pk *p, struct occ *o, size_t i, bool first)
{
    size_t visits = pk_visits(p, i), a = p->size[i], m = 0, j, cur = 0, best = NONE, gap = NONE;
    size_t max = visits < p->n - 1 ? visits : p->n - 1; /* conf: 2 n spans */

    if (o->ok && (best = occ_fit(o, p->lo[i], p->hi[i], a, first, max, p->conf)) != NONE) {
        p->work += visits + 4 * occ_placed(o, p->lo[i], p->hi[i]);
        return best;
    }
    FOR_OVERLAP(p, i, j, if (p->off[j] != NONE) p->conf[m++] = pk_span(p, j));
    p->work += 4 * m;
    sort_spans(p->conf, p->conf + p->n, p->cnt, m);
    for (size_t q = 0; q < m && !(first && best != NONE); q++) {
        if (p->conf[q].lo > cur && p->conf[q].lo - cur >= a && p->conf[q].lo - cur < gap) {
            gap = p->conf[q].lo - cur;
            best = cur;
        }
        cur = p->conf[q].hi > cur ? p->conf[q].hi : cur;
    }
    return best != NONE ? best : cur;
}

/* Places the instances in the order ord, each at the lowest offset of the smallest gap
 * between the placed ones it overlaps that holds it (first fit: of the lowest such
 * gap), else above them: the end, or NONE once it reaches cut, or *live (live not NULL:
 * a cut other threads' passes lower meanwhile, read every 256 placements; at or below
 * the bound, at once). Those with fixed[i] set (fixed not NULL) keep that offset. Past
 * OCC_MIN instances that overlap OCC_VISITS others on average, the bytes taken come
 * from an occupancy tree (pack_occ.c) where that is cheaper: GPT-2 of 1,000 layers' plan
 * at the budget halfway to `none`'s peak, 55,200 instances overlapping 8,000 others on
 * average. */
static size_t pk_pass(struct pk *p, const size_t *ord, bool first, size_t cut,
                      const size_t *fixed, const size_t *live)
{
    size_t end = 0;
    struct occ o = {0};

    if (p->n >= OCC_MIN && p->visits >= (size_t)OCC_VISITS * p->n)
        occ_init(&o, p->al, p->ns, p->nu ? p->nu : 1);
    for (size_t i = 0; i < p->n; i++)
        p->off[i] = NONE;
    for (size_t k = 0; k < p->n && end < cut; k++) {
        if (live && (k & 255) == 0) {
            size_t c = __atomic_load_n(live, __ATOMIC_RELAXED);

            cut = c < cut ? c : cut;
            if (cut <= p->bound || end >= cut) {
                end = cut;
                break;
            }
        }
        size_t i = ord[k], a = p->size[i];

        if (fixed && fixed[i] != NONE) /* placed beforehand (pk_fill) */
            p->off[i] = fixed[i];
        else
            p->off[i] = a ? pk_fit(p, &o, i, first) : 0;
        end = p->off[i] + a > end ? p->off[i] + a : end;
        if (a && o.ok)
            occ_add(&o, p->lo[i], p->hi[i], pk_span(p, i));
    }
    occ_fini(&o);
    return end < cut ? end : NONE;
}

const struct order pk_orders[] = {
    {{KEY_SIZE, KEY_LENGTH, KEY_LOAD}, false}, /* greedy by size */
    {{KEY_SIZE, KEY_START, KEY_LENGTH}, true}, /* by size, earliest first: the former */
    {{KEY_LOAD, KEY_SIZE, KEY_LENGTH}, false}, /* the crowded steps first ("breadth") */
    {{KEY_AREA, KEY_SIZE, KEY_LOAD}, false},   /* size times duration */
    {{KEY_LENGTH, KEY_AREA, KEY_LOAD}, false}, /* the search's: MiniMalloc's WAT, TAW, TWA */
    {{KEY_LOAD, KEY_AREA, KEY_LENGTH}, false},
    {{KEY_LOAD, KEY_LENGTH, KEY_AREA}, false},
    {{KEY_START, KEY_SIZE, KEY_LENGTH}, false}, /* the sweep's (pk_sweep) */
};

void pk_order(struct pk *p, const struct order *o, size_t *ord)
{
    for (size_t i = 0; i < p->n; i++) {
        size_t a = p->size[i], d = p->inst[i].last - p->inst[i].first + 1;
        size_t val[5] = {a, d, a > SIZE_MAX / d ? SIZE_MAX : a * d, pk_load_over(p, i),
                         ~p->inst[i].first};

        p->keys[i] = (struct key){{~val[o->key[0]], ~val[o->key[1]], ~val[o->key[2]]}, i};
    }
    p->work += 20 * p->n;
    sort_keys(p, ord);
}

void pk_keep(struct pk *p, size_t end)
{
    if (end < p->best) {
        p->best = end;
        memcpy(p->best_off, p->off, p->n * sizeof *p->off);
    }
}

/* When all are live at one step (the bound is the sum of the sizes: the host tier, where
 * every offloaded value waits out the turn to the backward), the first greedy pass
 * stacks them in its order: that packing (at the bound) without its O(k^2 log k) walk. */
static bool pk_stack(struct pk *p)
{
    size_t sum = 0;

    for (size_t i = 0; i < p->n; i++)
        sum += p->size[i];
    if (sum != p->bound)
        return false;
    pk_order(p, &pk_orders[0], p->ord);
    for (size_t k = 0, at = 0; k < p->n; at += p->size[p->ord[k++]])
        p->off[p->ord[k]] = p->size[p->ord[k]] ? at : 0; /* as pk_pass: empty ones at 0 */
    pk_keep(p, sum);
    return true;
}

/* The best-fit pass in order of first step, as a sweep (pack_sweep.c): O(n log n) where
 * the other passes gather and sort every placed instance overlapping the next one. It
 * meets the bound where most values stay live to the backward (`none` on GPT-2 of
 * 1,000 layers: 44,015 instances, 44,000 live at the peak, where a pass by load took
 * 3.3 s), and it is kept like a pass: the others then count only where they end lower,
 * and are cut at its end. Skipped when out of memory (the passes follow). */
static void pk_sweep(struct pk *p, size_t cut)
{
    pk_order(p, &pk_orders[SWEEP_ORDER], p->ord);
    p->work += 20 * p->n;
    pk_keep(p, pack_sweep(p->al, p->n, p->nu, p->size, p->lo, p->hi, p->ord, p->off, cut));
}

/* Greedy passes; then the search at the lower bound with half the work, and if it
 * fails, at capacities a little above in increasing order until one is met. */
static void pk_search(struct pk *p, size_t work)
{
    static const unsigned slack[] = {0, 10, 30, 50, 100, 200}; /* per mille of the bound */
    size_t stop = p->work + work;

    p->best = NONE;
    if (pk_stack(p))
        return;
    pk_sweep(p, NONE);
    for (size_t o = 0; o < N_GREEDY && p->best > p->bound; o++) {
        pk_order(p, &pk_orders[o], p->ord);
        pk_keep(p, pk_pass(p, p->ord, pk_orders[o].first_fit, p->best, NULL, NULL));
    }
    pk_repair(p);
    for (size_t k = 0; k < REMAT_ARRAY_LEN(slack) && p->work < stop; k++) {
        size_t cap = p->bound + p->bound / 1000 * slack[k];

        if (cap >= p->best ||
            pk_solve(p, cap, k ? p->work + (stop - p->work) / 3 : p->work + work / 2))
            break;
    }
}

/* The quick packing's order of the greedy passes: by load first, which meets the bound
 * on the transformers' plans where greedy by size does not (GPT-2 and BERT of hundreds of
 * layers: 0.4-0.8 MB above it), then the others. The end is the same in any order (the
 * least of all four, or the bound once one meets it); the offsets may differ. */
static const size_t quick_order[N_GREEDY] = {2, 0, 1, 3};

/*
 * The quick packing's passes on two lanes (pk_quick): each lane takes the next pass of
 * quick_order as it finishes one and runs it on its own offsets, order and scratch (the
 * packer's index is shared, read only). The end is the sequence's: the first pass (in
 * order) of the least end below the sweep's. So pass o is cut where it can no longer be
 * that one: at the sweep's end, at the end of a pass before it, at a byte past the end of
 * one after it (cut[o], lowered as passes finish). The pass that is that one is never
 * cut, and each lane keeps the first of least end among its own. A lane takes the next
 * pass as it frees, not the passes two at a time: GPT-2-1000's approx-tc plan at 1.2% of
 * the way from its least total to `none`'s, whose four passes all end above the sweep's,
 * placed 834, 16,468, 3,187 and 31,650 instances before their cuts.
 */
struct pk_lanes {
    struct pk *q[2];
    size_t *keep[2];         /* each lane's best offsets (lane 0's: the packer's own) */
    size_t best[2];          /* their ends (lane 0's from the sweep's) */
    int from[2];             /* and their passes (-1: the sweep's) */
    size_t cut[N_GREEDY];
    int next;
};

/* *x lowered to v where v is lower, against other threads doing the same. */
static void lower_to(size_t *x, size_t v)
{
    size_t cur = __atomic_load_n(x, __ATOMIC_RELAXED);

    while (v < cur &&
           !__atomic_compare_exchange_n(x, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void lane_job(void *ctx, int k)
{
    struct pk_lanes *l = ctx;
    struct pk *q = l->q[k];

    for (int o; (o = __atomic_fetch_add(&l->next, 1, __ATOMIC_RELAXED)) < N_GREEDY;) {
        const struct order *ord = &pk_orders[quick_order[o]];
        size_t end;

        if (__atomic_load_n(&l->cut[o], __ATOMIC_RELAXED) <= q->bound)
            continue; /* a pass before it met the bound */
        pk_order(q, ord, q->ord);
        end = pk_pass(q, q->ord, ord->first_fit, __atomic_load_n(&l->cut[o], __ATOMIC_RELAXED),
                      NULL, &l->cut[o]);
        if (end == NONE)
            continue;
        for (int i = 0; i < N_GREEDY; i++)
            if (i != o)
                lower_to(&l->cut[i], i > o ? end : end + 1);
        if (end < l->best[k]) { /* a lane's passes come in order: a later one only lower */
            l->best[k] = end;
            l->from[k] = o;
            memcpy(l->keep[k], q->off, q->n * sizeof *q->off);
        }
    }
}

/* Past QUICK_LANES_MIN instances, on two cores, the quick packing runs its passes on two
 * lanes (GPT-2 of 1,000 layers: 65,835 instances, passes of 0.14-0.27 s each). */
#define QUICK_LANES_MIN 8192

/* How far past give_up the quick packing's passes go on (1/QUICK_MEND of it): a pass
 * ending there may come within give_up mended (pk_repair; GPT-2-1000's approx-tc plans:
 * 2.7 MB above loads of 1-4 GB). */
#define QUICK_MEND 128

/* The quick packing (give_up below NONE): the greedy passes alone, the sweep's offsets
 * mended before the others run (none does where that meets the bound), each pass cut
 * where it can no longer end lowest (pk_lanes) or passes give_up by 1/QUICK_MEND, and
 * the best mended; best stays NONE when that does not end within give_up. On two lanes
 * the same offsets come out as on one. */
static void pk_quick(struct pk *p, size_t give_up)
{
    struct pk q2 = *p;
    struct pk_lanes l = {{p, &q2}, {p->best_off, NULL}, {NONE, NONE}, {-1, -1}, {0}, 0};
    size_t n = p->n, bytes = 0;
    /* the passes go on a little past give_up, where the mending may bring them back */
    size_t cut = give_up / QUICK_MEND >= SIZE_MAX - 1 - give_up
                     ? SIZE_MAX - 1 : give_up + 1 + give_up / QUICK_MEND;
    void *scratch = NULL;
    int lanes = 1;

    p->best = NONE;
    if (pk_stack(p)) {
        if (p->best > give_up)
            p->best = NONE;
        return;
    }
    if (n >= QUICK_LANES_MIN && core_par_threads_with(p->al) > 1 &&
        (scratch = core_alloc(p->al, bytes = n * (4 * sizeof(size_t) + 2 * sizeof(struct span) +
                                                  sizeof(struct key)) + 2 * sizeof(size_t)))) {
        q2.off = scratch;
        q2.ord = q2.off + n;
        q2.cnt = q2.ord + n; /* n + 2 */
        l.keep[1] = q2.cnt + n + 2;
        q2.conf = (struct span *)(l.keep[1] + n);
        q2.keys = (struct key *)(q2.conf + 2 * n);
        lanes = 2;
    }
    pk_sweep(p, cut);
    pk_repair(p); /* the sweep's offsets mended: where they meet the bound, no pass runs */
    l.best[0] = p->best;
    for (int o = 0; o < N_GREEDY; o++)
        l.cut[o] = p->best != NONE ? p->best : cut;
    if (p->best > p->bound)
        core_par_run(lanes, lanes, lane_job, &l);
    /* lane 0 wrote the packer's own best offsets; lane 1's first of least end wins ties
     * only with a pass before lane 0's */
    if (lanes == 2 &&
        (l.best[1] < l.best[0] || (l.best[1] == l.best[0] && l.from[1] < l.from[0]))) {
        l.best[0] = l.best[1];
        memcpy(p->best_off, l.keep[1], n * sizeof *p->off);
    }
    p->best = l.best[0];
    core_free(p->al, scratch, bytes);
    if (l.from[0] >= 0 || l.from[1] >= 0) /* a pass's offsets, not the sweep's mended */
        pk_repair(p);
    if (p->best > give_up)
        p->best = NONE;
}

/* One block for every array of the packer over n instances (seg and undo apart). */
static remat_status pk_init(const remat_allocator *al, const struct instance *inst, size_t n,
                            size_t align, struct pk *p, void **block, size_t *bytes)
{
    size_t ns = 1, words;

    while (ns < n)
        ns <<= 1;
    /* 11 n-arrays, at, sat, then load, tag, own, stamp, dirty, mt and ad on the tree */
    words = 11 * n + 2 + (n + 2) + (2 * ns + 1) + 7 * 2 * ns;
    *bytes = words * sizeof(size_t) +
             n * (2 * sizeof(struct span) + sizeof(struct key)) + (n + 1) * sizeof(struct frame);
    *block = core_calloc(al, *bytes, 1);
    p->al = al;
    if (!*block)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory packing %zu instances", n);
    p->inst = inst;
    p->n = n;
    p->ns = ns;
    {
        size_t *w = *block, **arr[] = {&p->size, &p->lo, &p->hi, &p->byfirst, &p->off,
                                       &p->best_off, &p->ord, &p->minoff, &p->pidx, &p->tot,
                                       &p->cnt};
        size_t **tree[] = {&p->load, &p->tag, &p->own, &p->stamp, &p->dirty, &p->mt, &p->ad};

        for (size_t k = 0; k < REMAT_ARRAY_LEN(arr); k++, w += n)
            *arr[k] = w;
        p->at = w += 2; /* cnt: n + 2 */
        p->sat = w + n + 2;
        w = p->sat + 2 * ns + 1;
        for (size_t k = 0; k < REMAT_ARRAY_LEN(tree); k++, w += 2 * ns)
            *tree[k] = w;
        p->conf = (struct span *)w;
        p->keys = (struct key *)(p->conf + 2 * n); /* conf: n spans, then sort_spans' n */
        p->fr = (struct frame *)(p->keys + n);
    }
    for (size_t i = 0; i < n; i++) {
        p->size[i] = core_align_up(inst[i].bytes, align);
        p->n_pos += p->size[i] > 0;
    }
    return REMAT_OK;
}

/* Frees what pk_init and pk_index allocated. */
static void pk_fini(struct pk *p, void *block, size_t bytes)
{
    core_free(p->al, p->seg, sizeof *p->seg * (p->n_seg + 1));
    core_free(p->al, p->undo, sizeof *p->undo * p->cap_undo);
    core_free(p->al, block, bytes);
}

remat_status layout_mend(const remat_allocator *al, struct instance *inst, size_t n,
                         size_t align, size_t *end)
{
    struct pk p = {0};
    void *block = NULL;
    size_t bytes = 0;
    remat_status st = pk_init(al, inst, n, align, &p, &block, &bytes);

    if (!st && !(st = pk_index(&p))) {
        p.best = 0;
        for (size_t i = 0; i < n; i++) {
            p.best_off[i] = p.size[i] ? inst[i].offset : 0;
            p.best = p.size[i] && inst[i].offset + p.size[i] > p.best ? inst[i].offset + p.size[i]
                                                                    : p.best;
        }
        pk_repair(&p);
        for (size_t i = 0; i < n; i++)
            inst[i].offset = p.best_off[i];
        *end = p.best;
    }
    pk_fini(&p, block, bytes);
    return st;
}

remat_status pack_run(const remat_allocator *al, const struct instance *inst, size_t n,
                      size_t align, struct instance *dst, size_t *out, size_t work,
                      const size_t *fixed, size_t give_up)
{
    struct pk p = {0};
    void *block = NULL;
    size_t bytes = 0;
    remat_status st = pk_init(al, inst, n, align, &p, &block, &bytes);

    if (!st && !(st = pk_index(&p)))
        *out = p.bound;
    if (!st && dst && !fixed && give_up != NONE)
        pk_quick(&p, give_up);
    else if (!st && dst && !fixed)
        pk_search(&p, work);
    if (!st && dst && fixed) {
        p.best = NONE;
        pk_order(&p, &pk_orders[0], p.ord);
        pk_keep(&p, pk_pass(&p, p.ord, false, NONE, fixed, NULL));
    }
    if (!st && dst && p.best == NONE)
        st = REMAT_ERR_INFEASIBLE; /* the quick packing gave up */
    else if (!st && dst) {
        for (size_t i = 0; i < n; i++)
            dst[i].offset = p.best_off[i];
        *out = p.best;
    }
    pk_fini(&p, block, bytes);
    return st;
}
