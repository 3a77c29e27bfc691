/*
 * test_relocate.c - holding the arena within a cap by moving live instances
 * (src/mem/relocate.c) and replaying the moves (src/exec/exec.c): a case worked by
 * hand; random instance sets with pins, checked by replaying every move step by step
 * here (an independent walk: offsets per step, the copies' sources and destinations,
 * no two live instances sharing a byte); the refusal below the load; and a real plan
 * (DenseNet-121 under hybrid at its least budget, whose packed offsets end 18% above
 * the load) trained with its moves: the arena within the cap, measured == planned, the
 * moved bytes as planned, the same parameters as `none`.
 *
 * Seed: REMAT_SEED (printed).
 */
#include "harness.h"
#include "mem/layout.h"

#include <stdint.h>

#define ALIGN 64

static uint64_t rng;

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t urand(size_t n)
{
    return (size_t)(next() % n);
}

static bool clash(size_t a, size_t an, size_t b, size_t bn)
{
    return an && bn && a < b + bn && b < a + an;
}

static bool is_pinned(const struct pin *p, size_t t)
{
    return p && ((p->lo[0] < t && t <= p->hi[0]) || (p->lo[1] < t && t <= p->hi[1]));
}

/* Walks the steps: before step t the moves of t, each taking a live instance made
 * before t from where it is to bytes no other holder of data uses, a pinned one
 * marked as waiting; then the instances made at t at their offsets; then every pair
 * live at t apart, all below cap. Returns the first problem, NULL when none. */
static const char *replay(const struct instance *in, size_t n, const struct moves *mv,
                          const struct pin *pins, size_t cap)
{
    static size_t off[512];
    size_t steps = 0, k = 0;

    REMAT_ASSERT_TEST(n <= 512);
    for (size_t i = 0; i < n; i++)
        steps = in[i].last + 1 > steps ? in[i].last + 1 : steps;
    for (size_t t = 0; t < steps; t++) {
        for (; k < mv->n && mv->m[k].step <= t; k++) {
            const struct move *m = &mv->m[k];
            const struct instance *x = &in[m->inst];

            if (m->step != t)
                return "moves out of step order";
            if (x->first >= t || x->last < t)
                return "a move of an instance not holding data";
            if (off[m->inst] != m->from || m->bytes != x->bytes)
                return "a move from where the instance is not";
            if (is_pinned(pins ? &pins[m->inst] : NULL, t) && !m->waits)
                return "a pinned instance moved without waiting";
            if (m->to + m->bytes > cap)
                return "a move past the cap";
            for (size_t j = 0; j < n; j++)
                if (j != m->inst && in[j].first < t && t <= in[j].last &&
                    clash(m->to, m->bytes, off[j], in[j].bytes))
                    return "a move over another live instance";
            off[m->inst] = m->to;
        }
        for (size_t i = 0; i < n; i++)
            if (in[i].first == t)
                off[i] = in[i].offset;
        for (size_t i = 0; i < n; i++) {
            if (in[i].first > t || t > in[i].last || !in[i].bytes)
                continue;
            if (off[i] + in[i].bytes > cap)
                return "an instance past the cap";
            for (size_t j = i + 1; j < n; j++)
                if (in[j].first <= t && t <= in[j].last &&
                    clash(off[i], in[i].bytes, off[j], in[j].bytes))
                    return "two live instances share bytes";
        }
    }
    return k == mv->n ? NULL : "moves after the last step";
}

/* A at 0, B at 64, C at 128 (cap 192); at step 2 A and C are gone and D needs 128
 * contiguous bytes: the cheapest window is [0, 128), holding B only, which moves to the
 * one gap left, [128, 192). */
static void test_by_hand(void)
{
    struct instance in[] = {
        {0, 0, 1, 64, 0}, {1, 0, 3, 64, 0}, {2, 0, 1, 64, 0}, {3, 2, 3, 128, 0}};
    struct moves mv = {0};
    size_t end = 0;

    CHECK_OK(layout_relocate(NULL, in, 4, ALIGN, 192, NULL, &mv, &end));
    CHECK_I64(in[0].offset, 0);
    CHECK_I64(in[1].offset, 64);
    CHECK_I64(in[2].offset, 128);
    CHECK_I64(in[3].offset, 0);
    CHECK_I64(end, 192);
    CHECK_I64(mv.n, 1);
    if (mv.n == 1) {
        CHECK_I64(mv.m[0].step, 2);
        CHECK_I64(mv.m[0].inst, 1);
        CHECK_I64(mv.m[0].from, 64);
        CHECK_I64(mv.m[0].to, 128);
        CHECK_I64(mv.bytes, 64);
    }
    CHECK(!replay(in, 4, &mv, NULL, 192), "%s", replay(in, 4, &mv, NULL, 192));
    moves_fini(NULL, &mv);
    /* 191 bytes hold 128 + 64 rounded to 64 no longer */
    CHECK(layout_relocate(NULL, in, 4, ALIGN, 191, NULL, &mv, &end) == REMAT_ERR_INFEASIBLE,
          "a cap below the load was accepted");
}

/* The largest sum of rounded sizes live at one step. */
static size_t load_of(const struct instance *in, size_t n)
{
    size_t best = 0;

    for (size_t t = 0; t < 100; t++) {
        size_t sum = 0;

        for (size_t i = 0; i < n; i++)
            if (in[i].first <= t && t <= in[i].last)
                sum += (in[i].bytes + ALIGN - 1) / ALIGN * ALIGN;
        best = sum > best ? sum : best;
    }
    return best;
}

/* n instances over 48 steps in allocation order, sizes of 1 to 16 units of 64 bytes
 * (some odd), a third pinned over part of their lives. */
static void random_set(struct instance *in, struct pin *pins, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t first = urand(48), len = urand(8) == 0 ? urand(40) : urand(6);

        in[i] = (struct instance){(int32_t)i, first, first + len,
                                  (1 + urand(16)) * ALIGN - (urand(4) == 0 ? 3 : 0), 0};
        pins[i] = (struct pin){{0, 0}, {0, 0}};
        if (urand(3) == 0) {
            pins[i].lo[0] = first + urand(len + 1);
            pins[i].hi[0] = pins[i].lo[0] + urand(4);
        }
    }
    for (size_t i = 1; i < n; i++) /* allocation order: by first step */
        for (size_t j = i; j > 0 && in[j - 1].first > in[j].first; j--) {
            struct instance ti = in[j];
            struct pin tp = pins[j];

            in[j] = in[j - 1];
            in[j - 1] = ti;
            pins[j] = pins[j - 1];
            pins[j - 1] = tp;
        }
}

static bool same_moves(const struct moves *a, const struct moves *b)
{
    if (a->n != b->n || a->bytes != b->bytes || a->waits != b->waits)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const struct move *x = &a->m[i], *y = &b->m[i];

        if (x->step != y->step || x->inst != y->inst || x->from != y->from || x->to != y->to ||
            x->bytes != y->bytes || x->waits != y->waits)
            return false;
    }
    return true;
}

static void test_random(void)
{
    static struct instance in[200], again[200];
    static struct pin pins[200];
    size_t moved = 0, sets = 300;

    for (size_t s = 0; s < sets; s++) {
        size_t n = 20 + urand(180), load, end = 0, cap;
        struct moves mv = {0}, mv2 = {0};
        const char *why;

        random_set(in, pins, n);
        load = load_of(in, n);
        cap = s % 3 == 0 ? load : load + urand(4) * ALIGN;
        memcpy(again, in, sizeof *in * n);
        CHECK_OR(layout_relocate(NULL, in, n, ALIGN, cap, pins, &mv, &end) == REMAT_OK,
                 continue, "set %zu: no layout within %zu bytes (load %zu)", s, cap, load);
        why = replay(in, n, &mv, pins, cap);
        CHECK(!why, "set %zu (%zu instances, cap %zu): %s", s, n, cap, why);
        CHECK(end <= cap && end >= load, "set %zu: end %zu, load %zu, cap %zu", s, end, load,
              cap);
        CHECK(layout_moves_check(in, n, &mv, pins, cap), "set %zu: layout_moves_check", s);
        /* the same instances, the same offsets and moves */
        CHECK_OK(layout_relocate(NULL, again, n, ALIGN, cap, pins, &mv2, &end));
        CHECK(same_moves(&mv, &mv2) && !memcmp(again, in, sizeof *in * n),
              "set %zu: not deterministic", s);
        moved += mv.n;
        moves_fini(NULL, &mv);
        moves_fini(NULL, &mv2);
        if (load > ALIGN)
            CHECK(layout_relocate(NULL, again, n, ALIGN, load - ALIGN, pins, &mv, &end) ==
                      REMAT_ERR_INFEASIBLE,
                  "set %zu: a cap below the load was accepted", s);
    }
    CHECK(moved > 0, "no set needed a move: the test does not exercise them");
    printf("  %zu sets, %zu moves\n", sets, moved);
}

/* layout_moves_check (the library's checker, a sweep that looks only at what changed
 * at each step) against replay on relocated random sets and on mutants of them: an
 * instance's offset shifted, a move's destination shifted, a wait dropped, the cap cut.
 * The two must agree on every one, and most mutants must be refused. */
static void test_checker_agrees(void)
{
    static struct instance in[200], bad[200];
    static struct pin pins[200];
    size_t refused = 0, tried = 0;

    for (size_t s = 0; s < 120; s++) {
        size_t n = 20 + urand(180), load, end = 0, cap;
        struct moves mv = {0};

        random_set(in, pins, n);
        load = load_of(in, n);
        cap = load + urand(3) * ALIGN;
        if (layout_relocate(NULL, in, n, ALIGN, cap, pins, &mv, &end))
            continue;
        CHECK(layout_moves_check(in, n, &mv, pins, cap) && !replay(in, n, &mv, pins, cap),
              "set %zu: a relocated set refused", s);
        for (int kind = 0; kind < 4; kind++) {
            struct move keep = {0};
            size_t at = 0, c = cap;
            bool ok, want;

            memcpy(bad, in, sizeof *in * n);
            if (kind == 0) { /* an instance elsewhere */
                at = urand(n);
                bad[at].offset = urand(2) && bad[at].offset >= ALIGN ? bad[at].offset - ALIGN
                                                                      : bad[at].offset + ALIGN;
            } else if (kind == 3) { /* less room */
                c = cap - ALIGN;
            } else if (mv.n) { /* a move to elsewhere, or one that no longer waits */
                at = urand(mv.n);
                keep = mv.m[at];
                if (kind == 1)
                    mv.m[at].to = mv.m[at].to >= ALIGN ? mv.m[at].to - ALIGN : mv.m[at].to + ALIGN;
                else
                    mv.m[at].waits = false;
            } else {
                continue;
            }
            ok = layout_moves_check(bad, n, &mv, pins, c);
            want = replay(bad, n, &mv, pins, c) == NULL;
            CHECK(ok == want, "set %zu mutant %d: layout_moves_check says %d, replay %d", s,
                  kind, ok, want);
            tried++;
            refused += !ok;
            if ((kind == 1 || kind == 2) && mv.n)
                mv.m[at] = keep;
        }
        moves_fini(NULL, &mv);
    }
    printf("  %zu mutants, %zu refused by both checkers\n", tried, refused);
    CHECK(tried > 200 && refused * 2 > tried, "%zu of %zu mutants refused", refused, tried);
}

/* DenseNet-121, batch 2, 32x32: hybrid at its least budget packs 18% above the load
 * (offloads interleave), so the plan holds the arena by moves. */
static void test_train_with_moves(void)
{
    remat_zoo_opts zo = {0};
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;
    remat_schedule *s = NULL, *none = NULL;
    remat_plan_opts po = {0};
    remat_plan_info info;
    uint64_t sum[2] = {0, 0};

    zo.batch = 2;
    zo.height = zo.width = 32;
    REMAT_ASSERT_TEST(!remat_zoo_build("densenet121", &zo, NULL, &g) &&
                      !remat_tgraph_from_graph(g, NULL, &tg));
    po.strategy = REMAT_STRATEGY_HYBRID;
    po.budget_min = true;
    CHECK_OK(remat_plan(tg, &po, &s, &info));
    CHECK_OK(remat_plan_none(tg, &none));
    CHECK(info.n_moves > 0 && info.moved_bytes > 0, "the plan moves nothing (%d)",
          info.n_moves);
    for (int k = 0; k < 2 && s && none; k++) {
        remat_train_opts to = remat_train_opts_default();
        remat_trainer *t = NULL;
        remat_train_stats st;
        double loss;

        to.seed = 7;
        CHECK_OK(remat_trainer_new(g, tg, k ? s : none, &to, &t));
        if (!t)
            break;
        for (int i = 0; i < 2; i++)
            CHECK_OK(remat_trainer_step(t, NULL, NULL, &loss));
        remat_trainer_stats(t, &st);
        CHECK_I64(st.measured_peak_bytes, st.planned_peak_bytes);
        if (k) {
            CHECK_I64(st.arena_bytes, info.arena_bytes);
            CHECK_I64(st.moved_bytes, 2 * info.moved_bytes);
            CHECK(st.arena_bytes + st.resident_bytes <= info.total_bytes,
                  "arena %zu + resident %zu > %zu", st.arena_bytes, st.resident_bytes,
                  info.total_bytes);
        }
        sum[k] = remat_trainer_param_checksum(t);
        remat_trainer_free(t);
    }
    CHECK(sum[0] == sum[1], "parameters differ: none %016llx, hybrid with moves %016llx",
          (unsigned long long)sum[0], (unsigned long long)sum[1]);
    remat_schedule_free(s);
    remat_schedule_free(none);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    const char *e = getenv("REMAT_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 10) : 20261124;

    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
    rng = seed;
    RUN(test_by_hand);
    RUN(test_random);
    RUN(test_checker_agrees);
    RUN(test_train_with_moves);
    return harness_end();
}
