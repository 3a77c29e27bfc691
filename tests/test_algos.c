/*
 * test_algos.c - the kernels' part of planning (src/plan/algos.c) and of the simulator
 * and the layout, worked by hand on the diamond of diamond.h with a made-up table of
 * algorithms: the choice per op and pass under several caps, the least-peak cap, forcing
 * one algorithm, the scratch in the peak and the lower limit, the timeline without it,
 * the one-step scratch instances of the layout, and the misuses.
 */
#include "diamond.h"
#include "mem/layout.h"
#include "plan/algos.h"

#include <stdlib.h>
#include <string.h>

/* The diamond's kernels, made up: conv a forward {2: 900, 1: 300, 0: 0} bytes of
 * scratch (fastest first), backward {2: 2000, 0: 100}; fc forward {0: 64}, backward
 * {0: 128}; every other op one algorithm with none; the view (flatten) no kernel. */
static const char *fake_name(int32_t id)
{
    static const char *const n[] = {"slow", "mid", "fast"};

    return id >= 0 && id < 3 ? n[id] : "?";
}

static remat_algos *fake_algos(int32_t n_ops)
{
    static const struct {
        int32_t op, pass, id;
        size_t scratch;
    } ch[] = {
        {0, 0, 2, 900}, {0, 0, 1, 300}, {0, 0, 0, 0}, {0, 1, 2, 2000}, {0, 1, 0, 100},
        {1, 0, 0, 0}, {1, 1, 0, 0}, {2, 0, 0, 0}, {2, 1, 0, 0}, {3, 0, 0, 0}, {3, 1, 0, 0},
        {5, 0, 0, 64}, {5, 1, 0, 128}, {6, 0, 0, 0}, {6, 1, 0, 0},
    };
    remat_algos *a = calloc(1, sizeof *a);
    size_t k = 0;

    REMAT_ASSERT_TEST(a && (a->first = calloc(2 * (size_t)n_ops + 1, sizeof *a->first)));
    a->n_ops = n_ops;
    a->name = fake_name;
    for (int32_t j = 0; j < 2 * n_ops; j++) {
        a->first[j] = a->n;
        for (; k < LEN(ch) && 2 * ch[k].op + ch[k].pass == j; k++)
            REMAT_ASSERT_TEST(algos_push(a, ch[k].id, ch[k].scratch) == REMAT_OK);
    }
    a->first[2 * n_ops] = a->n;
    REMAT_ASSERT_TEST(k == LEN(ch));
    return a;
}

/* The algorithm chosen at the first step of (op, pass), and its scratch. */
static int32_t chosen_algo(const remat_schedule *s, int32_t op, bool bwd, size_t *scratch)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->steps[i].id == op && s->steps[i].kind == (bwd ? REMAT_STEP_BWD : REMAT_STEP_FWD))
            return remat_schedule_step_algo(s, i, scratch);
    return -2;
}

/*
 * The kernels' choice and their scratch in the peak, worked by hand on the diamond's
 * `none` (live bytes per step in test_diamond_none: FWD conv 256 at step 0, FWD fc 832
 * at step 6, BWD fc 1088 at step 12, BWD conv 256 at step 23; peak 1280 at step 15).
 */
static void test_kernels(void)
{
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);
    remat_algos *a = fake_algos(remat_tgraph_n_ops(tg));
    size_t live[LEN(diamond_none)], live2[LEN(diamond_none)], sc;
    int32_t force, nc, nf;
    remat_sim_result r;

    CHECK_OK(algos_allowed(a, NULL, &force));
    CHECK_I64(force, -1);
    /* kept free while planning: the largest least scratch, fc's backward 128 */
    CHECK_I64(algos_reserve(a, -1), 128);
    /* no limit: every op its fastest; conv's backward (2000 at step 23, 256 live) is the
     * peak, 2256, and the largest single step (g(a) 256 + 2000) */
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(algos_choose(tg, a, -1, SIZE_MAX, s, &nc, &nf));
        CHECK(chosen_algo(s, 0, false, &sc) == 2 && sc == 900, "conv fwd: %d", chosen_algo(s, 0, false, NULL));
        CHECK(chosen_algo(s, 0, true, &sc) == 2 && sc == 2000, "conv bwd: %d", chosen_algo(s, 0, true, NULL));
        CHECK(chosen_algo(s, 5, true, &sc) == 0 && sc == 128, "fc bwd: %d", chosen_algo(s, 5, true, NULL));
        CHECK(chosen_algo(s, 4, false, &sc) == -1 && sc == 0, "the view: %d", chosen_algo(s, 4, false, NULL));
        CHECK_I64(nc, 2); /* conv's two passes have a choice */
        CHECK_I64(nf, 2);
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK_I64(r.activation_peak_bytes, 2256);
        CHECK_I64(r.peak_step, 23);
        CHECK_I64(r.scratch_peak_bytes, 2000);
        CHECK_I64(r.lower_bound_bytes, 2256);
        /* the timeline is the live bytes alone */
        CHECK_OK(remat_sim_timeline(tg, s, live, LEN(live)));
        {
            remat_schedule *plain = make_schedule(diamond_none, LEN(diamond_none));

            CHECK_OK(remat_sim_timeline(tg, plain, live2, LEN(live2)));
            CHECK(!memcmp(live, live2, sizeof live), "scratch changed the timeline");
            remat_schedule_free(plain);
        }
        /* the layout: one instance of the scratch per step that has any, the peak the
         * simulator's, nothing live overlapping */
        {
            struct layout lay;
            size_t n_scratch = 0, n_steps = 0;

            CHECK_OK(layout_build(tg, s, 64, &lay));
            for (size_t i = 0; i < lay.n_inst; i++)
                if (lay.inst[i].buf == -1) {
                    n_scratch++;
                    CHECK(lay.inst[i].first == lay.inst[i].last &&
                          lay.inst[i].bytes == s->scratch[lay.inst[i].first],
                          "scratch instance %zu: steps %zu-%zu, %zu bytes", i, lay.inst[i].first,
                          lay.inst[i].last, lay.inst[i].bytes);
                }
            for (size_t i = 0; i < s->n; i++)
                n_steps += s->scratch[i] > 0;
            CHECK_I64(n_scratch, 4); /* conv fwd and bwd, fc fwd and bwd */
            CHECK_I64(n_steps, 4);
            CHECK_I64(lay.peak_bytes, 2256);
            CHECK(layout_check(&lay), "scratch overlaps a live buffer");
            layout_fini(&lay);
        }
        remat_schedule_free(s);
    }
    /* cap 1280 + 128: conv fwd has 1408 - 256 = 1152 >= 900: fast; conv bwd 1152 < 2000:
     * the next that fits, slow (100); fc 1408 - 832 and 1408 - 1088 hold 64 and 128. The
     * peak stays none's 1280. */
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(algos_choose(tg, a, -1, 1408, s, &nc, &nf));
        CHECK_I64(chosen_algo(s, 0, false, NULL), 2);
        CHECK(chosen_algo(s, 0, true, &sc) == 0 && sc == 100, "conv bwd: %d", chosen_algo(s, 0, true, NULL));
        CHECK_I64(chosen_algo(s, 5, false, NULL), 0);
        CHECK_I64(nc, 2);
        CHECK_I64(nf, 1);
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK_I64(r.activation_peak_bytes, 1280);
        CHECK_I64(r.peak_step, 15);
        remat_schedule_free(s);
    }
    /* cap 0, the least peak: each step with its least scratch gives conv fwd 256 + 0,
     * fc fwd 832 + 64, fc bwd 1088 + 128, conv bwd 256 + 100: none above the 1280 of
     * step 15, so the cap is 1280: conv fwd has 1024 (fast), conv bwd 1024 (slow). */
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(algos_choose(tg, a, -1, 0, s, &nc, &nf));
        CHECK_I64(chosen_algo(s, 0, false, NULL), 2);
        CHECK_I64(chosen_algo(s, 0, true, NULL), 0);
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK_I64(r.activation_peak_bytes, 1280);
        remat_schedule_free(s);
    }
    /* cap 1100: conv fwd has 844: mid (300); peak: 1280 still (step 15) */
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(algos_choose(tg, a, -1, 1100, s, &nc, &nf));
        CHECK(chosen_algo(s, 0, false, &sc) == 1 && sc == 300, "conv fwd: %d", chosen_algo(s, 0, false, NULL));
        CHECK_I64(nf, 0);
        remat_schedule_free(s);
    }
    /* forcing one: "slow" everywhere it exists; "mid" only conv fwd has: elsewhere fit.
     * The reserve follows: 128, then conv fwd's 300. */
    CHECK_OK(algos_allowed(a, "slow", &force));
    CHECK_I64(force, 0);
    CHECK_I64(algos_reserve(a, force), 128);
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(algos_choose(tg, a, force, SIZE_MAX, s, &nc, &nf));
        CHECK(chosen_algo(s, 0, false, &sc) == 0 && sc == 0, "conv fwd: %d", chosen_algo(s, 0, false, NULL));
        CHECK_I64(chosen_algo(s, 0, true, NULL), 0);
        remat_schedule_free(s);
    }
    CHECK_OK(algos_allowed(a, "mid", &force));
    CHECK_I64(algos_reserve(a, force), 300);
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(algos_choose(tg, a, force, SIZE_MAX, s, &nc, &nf));
        CHECK_I64(chosen_algo(s, 0, false, NULL), 1);
        CHECK_I64(chosen_algo(s, 0, true, NULL), 2);
        remat_schedule_free(s);
    }
    CHECK(algos_allowed(a, "quick", &force) == REMAT_ERR_ARG, "an unknown algorithm was taken");
    CHECK(strstr(remat_errmsg(), "slow, mid, fast") != NULL, "message: %s", remat_errmsg());
    /* a table of another graph is refused */
    {
        remat_schedule *s = make_schedule(diamond_none, LEN(diamond_none));

        a->n_ops--;
        CHECK(algos_choose(tg, a, -1, SIZE_MAX, s, &nc, &nf) == REMAT_ERR_ARG,
              "a table for another graph was used");
        a->n_ops++;
        remat_schedule_free(s);
    }
    remat_algos_free(a);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_kernels);
    return harness_end();
}
