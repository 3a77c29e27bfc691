/*
 * test_sim.c - the simulator, the `none` plan and the liveness pass, on hand-worked
 * schedules.
 *
 * Peaks, nothing-freed and single-step bounds of two small graphs (a diamond and a
 * chain through concat), rejected schedules (read after free, BWD twice, a missing
 * BWD, a gradient read before all its contributions or freed between two of them, a
 * FWD of a live value, a FREE of a dead buffer), a valid recomputation and its
 * overhead, the FREE positions the liveness pass chooses, and the host tier (a value
 * offloaded and brought back: peaks, copy times and stalls; every misuse of OFFLOAD,
 * PREFETCH and WAIT rejected), and the copy slowdown (compute slowed while a copy is
 * under way: two copies each way overlapping a FWD and a BWD). Every expected number
 * is worked out by hand in the comments beside it.
 *
 * The random-graph property tests against an oracle are in test_sim_random.c.
 * Hand-built schedules use the internal schedule_new / schedule_push (plan/schedule.h);
 * nothing else of the library's internals is used to compute an expected answer.
 */
#include "diamond.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ helpers */

/* Runs the simulator on a hand-built schedule; returns its status. */
static remat_status sim_steps(const remat_tgraph *tg, const remat_step *st, size_t n,
                              remat_sim_result *r)
{
    remat_schedule *s = make_schedule(st, n);
    remat_status rc = remat_sim_run(tg, s, r);

    remat_schedule_free(s);
    return rc;
}

/* Expects REMAT_ERR_INVALID; when at_step >= 0, a message naming that step. */
#define CHECK_INVALID(tg, steps, at_step)                                                \
    do {                                                                                 \
        remat_sim_result r_;                                                             \
        char want_[32];                                                                  \
        remat_status s_ = sim_steps((tg), (steps), LEN(steps), &r_);                     \
        CHECK(s_ == REMAT_ERR_INVALID, "status %s, expected invalid",                    \
              remat_status_name(s_));                                                    \
        snprintf(want_, sizeof want_, "step %d:", (int)(at_step));                       \
        if ((at_step) >= 0)                                                              \
            CHECK(strstr(remat_errmsg(), want_) != NULL, "message '%s' lacks '%s'",      \
                  remat_errmsg(), want_);                                                \
    } while (0)

/* Checks that s equals want[] up to the order of FREEs after one step. */
static void check_same_schedule(const remat_schedule *s, const remat_step *want, size_t nw,
                                const char *what)
{
    const remat_step *st = remat_schedule_steps(s);
    size_t n = remat_schedule_n_steps(s), i = 0, j = 0;

    CHECK(n == nw, "%s: %zu steps, expected %zu", what, n, nw);
    while (i < n && j < nw) {
        size_t ie = i, je = j;

        CHECK(st[i].kind == want[j].kind && st[i].id == want[j].id,
              "%s: step %zu is kind %d id %d, expected kind %d id %d", what, i,
              (int)st[i].kind, st[i].id, (int)want[j].kind, want[j].id);
        i++, j++;
        /* the FREE runs that follow, as sets */
        for (ie = i; ie < n && st[ie].kind == REMAT_STEP_FREE; ie++)
            ;
        for (je = j; je < nw && want[je].kind == REMAT_STEP_FREE; je++)
            ;
        CHECK(ie - i == je - j, "%s: %zu FREEs after step %zu, expected %zu", what, ie - i,
              i - 1, je - j);
        for (size_t a = j; a < je; a++) {
            bool found = false;

            for (size_t b = i; b < ie; b++)
                found = found || st[b].id == want[a].id;
            CHECK(found, "%s: no FREE of buffer %d after step %zu", what, want[a].id, i - 1);
        }
        i = ie, j = je;
    }
}

static void test_diamond_none(void)
{
    static const size_t want_live[] = {
        256, 512, 256, 512, 768, 768, 832, 960, 896, 832, 896, 832, 1088, 832, 768,
        1280, 1024, 1024, 768, 512, 768, 512, 256, 256, 0,
    };
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);
    remat_schedule *s = NULL;
    remat_sim_result r;
    size_t live[LEN(diamond_none)];

    /* planned values owning a buffer: a b c d logits loss probs */
    CHECK_I64(remat_tgraph_n_planned(tg), 7);
    CHECK_OK(sim_steps(tg, diamond_none, LEN(diamond_none), &r));
    /* at BWD add: b, c, g(d), g(b), g(c), 256 each */
    CHECK_I64(r.activation_peak_bytes, 5 * 256);
    CHECK_I64(r.peak_step, 15);
    CHECK_I64(r.n_steps, LEN(diamond_none));
    /* 2 * (4 * 256 + 3 * 64) */
    CHECK_I64(r.naive_bytes, 2 * (4 * 256 + 3 * 64));
    /* single steps: FWD add reads b, c and writes d (768); BWD relu c reads c, g(c) and
     * writes g(b) (768); BWD add reads g(d) and writes g(b), g(c) (768); BWD relu b
     * reads b, g(b) and writes g(a) (768); nothing needs more */
    CHECK_I64(r.lower_bound_bytes, 3 * 256);
    CHECK(r.overhead == 0, "overhead %g", r.overhead);

    /* the timeline, step by step */
    {
        remat_schedule *hs = make_schedule(diamond_none, LEN(diamond_none));

        CHECK_OK(remat_sim_timeline(tg, hs, live, LEN(live)));
        for (size_t i = 0; i < LEN(want_live); i++)
            CHECK(live[i] == want_live[i], "live after step %zu = %zu, expected %zu", i,
                  live[i], want_live[i]);
        /* too small a buffer */
        CHECK(remat_sim_timeline(tg, hs, live, LEN(live) - 1) == REMAT_ERR_ARG,
              "a short timeline buffer was accepted");
        remat_schedule_free(hs);
    }

    /* the library's own `none` plan produces the same schedule up to the order of
     * FREEs after one step */
    CHECK_OK(remat_plan_none(tg, &s));
    if (s) {
        check_same_schedule(s, diamond_none, LEN(diamond_none), "remat_plan_none");
        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK_I64(r.activation_peak_bytes, 1280);
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Every rule of validity broken once on the diamond. */
static void test_diamond_invalid(void)
{
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);
    remat_sim_result r;

    /* no frees at all is valid: everything stays, peak = a b c d 4*256
     * + logits loss probs 3*64 + g(logits) 64 + g(d) 256 + g(b) g(c) 2*256 + g(a) 256
     * = 2304 (the naive figure 2432 also counts gradients of the loss and probs) */
    CHECK_OK(sim_steps(tg, diamond_nofree, LEN(diamond_nofree), &r));
    CHECK_I64(r.activation_peak_bytes, 8 * 256 + 4 * 64);
    {
        /* read after free: relu c reads b, freed at step 2 */
        static const remat_step s[] = {FW(0), FW(1), FR(D_B), FW(2)};
        CHECK_INVALID(tg, s, 3);
    }
    {
        /* BWD twice */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6), BW(6), BW(6)};
        CHECK_INVALID(tg, s, 8);
    }
    {
        /* a missing BWD (conv's: the weight gradient is never produced) */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6),
                                       BW(6), BW(5), BW(3), BW(2), BW(1)};
        CHECK_INVALID(tg, s, -1);
    }
    {
        /* b's producer (relu b, op 1) runs its backward before relu c (op 2), the second
         * reader of b, has added into g(b): g(b) is live but has 1 of 2 contributions */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6),
                                       BW(6), BW(5), BW(3), BW(1), BW(2), BW(0)};
        CHECK_INVALID(tg, s, 10);
    }
    {
        /* FWD of a value that is still live */
        static const remat_step s[] = {FW(0), FW(1), FW(1)};
        CHECK_INVALID(tg, s, 2);
    }
    {
        /* FREE of a buffer never allocated, and a second FREE */
        static const remat_step s1[] = {FW(0), FR(D_B)};
        static const remat_step s2[] = {FW(0), FR(D_A), FR(D_A)};
        static const remat_step s3[] = {FW(0), FR(2 * D_NV)}; /* past the last buffer */
        static const remat_step s4[] = {FW(0), FR(2)};        /* the weight: resident */
        CHECK_INVALID(tg, s1, 1);
        CHECK_INVALID(tg, s2, 2);
        CHECK_INVALID(tg, s3, 1);
        CHECK_INVALID(tg, s4, 1);
    }
    {
        /* a gradient freed after one of its two contributions: BWD relu c would add
         * into a fresh g(b) and the add's contribution would be lost */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6),
                                       BW(6), BW(5), BW(3), FR(G_B), BW(2), BW(1), BW(0)};
        CHECK_INVALID(tg, s, 11);
    }
    {
        /* reading a freed gradient: the linear's backward reads g(logits) */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6),
                                       BW(6), FR(G_LOGITS), BW(5)};
        CHECK_INVALID(tg, s, 9);
    }
    {
        /* BWD of the flatten, which has no backward; BWD before the op's forward */
        static const remat_step s1[] = {FW(0), FW(1), FW(2), FW(3), FW(4), BW(4)};
        static const remat_step s2[] = {FW(0), BW(1)};
        CHECK_INVALID(tg, s1, 5);
        CHECK_INVALID(tg, s2, 1);
    }
    {
        /* the BWD of the add needs g(d), which nothing has written yet */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6), BW(3)};
        CHECK_INVALID(tg, s, 7);
    }
    {
        /* a forward never run (the loss) while every backward is there is caught at
         * the first BWD that reads what it makes */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), BW(6)};
        CHECK_INVALID(tg, s, 6);
    }
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * A valid schedule that recomputes c (relu, op 2) for its backward, and one that also
 * recomputes a (conv, op 0) before the conv's backward (which does not need it: the
 * recomputation is wasted but legal).
 *
 * Kusumoto costs: conv 10, every other op 1; the forward cost sums T_v over the
 * plan-controlled values: a 10 + b 1 + c 1 + d 1 + flatten 1 + logits 1 + loss 1
 * = 16 (the saved probabilities cost nothing: their op is counted by the loss).
 */
static const remat_step diamond_recompute[] = {
    FW(0),                   /* 256 */
    FW(1), FR(D_A),           /* 512 -> 256 */
    FW(2),                   /* 512 */
    FW(3), FR(D_C),           /* 768 -> 512: c dropped */
    FW(4),                   /* 512 */
    FW(5),                   /* 576 */
    FW(6), FR(D_LOGITS), FR(D_LOSS), /* 704 -> 576 */
    BW(6), FR(D_PROBS),       /* 640 -> 576 */
    BW(5), FR(D_D), FR(G_LOGITS), /* 832 -> 512 */
    BW(3), FR(G_D),           /* 1024 -> 768 */
    FW(2),                   /* c again: 1024 */
    BW(2), FR(D_C), FR(G_C),   /* 1024 -> 512 */
    BW(1), FR(D_B), FR(G_B),   /* 768 -> 256 */
    BW(0), FR(G_A),           /* 256 -> 0 */
};

static void test_recompute(void)
{
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_KUSUMOTO);
    remat_tgraph *tgf = to_tgraph(g, REMAT_COST_FLOPS);
    remat_step both[LEN(diamond_recompute) + 2];
    remat_sim_result r;
    size_t n = 0, live[LEN(both)];
    remat_schedule *s;

    CHECK_OK(sim_steps(tg, diamond_recompute, LEN(diamond_recompute), &r));
    /* b, c, g(d) (freed after), g(b), g(c): at BWD add and again at the second FWD c:
     * b + g(b) + g(c) + c = 1024 */
    CHECK_I64(r.activation_peak_bytes, 4 * 256);
    CHECK(fabs(r.overhead - 1.0 / 16.0) < 1e-12, "overhead %.17g, expected 1/16",
          r.overhead);

    /* also recompute a (conv) right before the conv's backward, then drop it */
    for (size_t i = 0; i < LEN(diamond_recompute); i++) {
        if (diamond_recompute[i].kind == REMAT_STEP_BWD && diamond_recompute[i].id == 0) {
            both[n++] = (remat_step)FW(0);
            both[n++] = (remat_step)FR(D_A);
        }
        both[n++] = diamond_recompute[i];
    }
    REMAT_ASSERT_TEST(n == LEN(both));
    CHECK_OK(sim_steps(tg, both, n, &r));
    CHECK_I64(r.activation_peak_bytes, 4 * 256);
    /* (1 + 10) / 16 */
    CHECK(fabs(r.overhead - 11.0 / 16.0) < 1e-12, "overhead %.17g, expected 11/16",
          r.overhead);
    s = make_schedule(both, n);
    CHECK_OK(remat_sim_timeline(tg, s, live, n));
    CHECK_I64(live[n - 1], 0);
    /* g(a) 256 + a again 256 */
    CHECK_I64(live[n - 4], 512);
    remat_schedule_free(s);

    /* FLOP costs: conv 2 * 64 * 2 = 256, relu 64, relu 64, add 64 * (2 - 1) = 64,
     * flatten 0, linear 2 * 3 * 64 = 384, softmax_ce 5 * 3 + 1 = 16: total 848;
     * recomputing c costs 64 */
    CHECK_OK(sim_steps(tgf, diamond_recompute, LEN(diamond_recompute), &r));
    CHECK(fabs(r.overhead - 64.0 / 848.0) < 1e-12, "overhead %.17g, expected 64/848",
          r.overhead);
    remat_tgraph_free(tgf);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* The liveness pass on schedules without frees. */
static void test_liveness(void)
{
    /* the recomputing order without frees: c is produced twice; its first instance
     * ends after the add reads it, the second after its backward */
    static const remat_step recompute_nofree[] = {
        FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6), BW(6), BW(5), BW(3), FW(2), BW(2), BW(1), BW(0),
    };
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);
    remat_schedule *in, *out = NULL;

    in = make_schedule(diamond_nofree, LEN(diamond_nofree));
    CHECK_OK(schedule_liveness(tg, in, &out));
    if (out)
        check_same_schedule(out, diamond_none, LEN(diamond_none), "no recomputation");
    remat_schedule_free(out);
    out = NULL;
    /* frees already in the input are dropped and placed again */
    remat_schedule_free(in);
    in = make_schedule(diamond_none, LEN(diamond_none));
    CHECK_OK(schedule_liveness(tg, in, &out));
    if (out)
        check_same_schedule(out, diamond_none, LEN(diamond_none), "frees re-placed");
    remat_schedule_free(out);
    out = NULL;
    remat_schedule_free(in);

    in = make_schedule(recompute_nofree, LEN(recompute_nofree));
    CHECK_OK(schedule_liveness(tg, in, &out));
    if (out)
        check_same_schedule(out, diamond_recompute, LEN(diamond_recompute), "recompute");
    remat_schedule_free(out);
    remat_schedule_free(in);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* ------------------------------------------------------ a chain with concat */

/*
 * x (1,1,8,8) -> conv 2 out k3 p1 = a (1,2,8,8) -> avg_pool k2 = b (1,2,4,4)
 * -> relu = r; concat(b, r) = c (1,4,4,4) -> dropout = d -> flatten -> linear 5
 * -> softmax_ce.
 *
 * Sizes: a 128 * 4 = 512; b, r 32 * 4 = 128; c, d 64 * 4 = 256; logits (1,5) 20 -> 64;
 * loss 64; probs 64. Backward reads: avg_pool, concat, dropout nothing; relu r; linear
 * d (through the view); softmax_ce probs. b is read by relu and concat: two
 * contributions to g(b).
 *
 * Walk of the `none` schedule (live after each FWD/BWD, then its frees):
 *   FWD conv +a 512; FWD pool +b 640, free a -> 128; FWD relu +r 256;
 *   FWD concat +c 512, free b -> 384; FWD dropout +d 640, free c -> 384;
 *   FWD flatten 384; FWD fc +logits 448; FWD ce +loss +probs 576, free logits, loss 448;
 *   BWD ce +g(logits) 512, free probs 448; BWD fc +g(d) 704 <- peak,
 *   free d, g(logits) 384; BWD dropout +g(c) 640, free g(d) 384;
 *   BWD concat +g(b) +g(r) 640, free g(c) 384; BWD relu (g(b) live) 384, free r, g(r) 128;
 *   BWD pool +g(a) 640, free g(b) 512; BWD conv 512, free g(a) 0.
 */
static void test_chain_concat(void)
{
    static const size_t want_after_op[] = {512, 640, 256, 512, 640, 384, 448, 576,
                                           512, 704, 640, 640, 384, 640, 512};
    remat_graph *g = new_graph();
    remat_tgraph *tg;
    remat_schedule *s = NULL;
    remat_sim_result r;
    int32_t x, lab, a, b, rr, c, d, f, l, loss, in[2];

    x = remat_graph_input(g, "x", 4, (int64_t[]){1, 1, 8, 8});
    lab = remat_graph_labels(g, "labels", 1);
    a = remat_graph_add(g, REMAT_OP_CONV2D, &x, 1,
                        &(remat_attrs){.out_channels = 2, .kh = 3, .kw = 3, .ph = 1, .pw = 1},
                        "a");
    b = remat_graph_add(g, REMAT_OP_AVG_POOL, &a, 1, &(remat_attrs){.kh = 2, .kw = 2}, "b");
    rr = remat_graph_add(g, REMAT_OP_RELU, &b, 1, NULL, "r");
    in[0] = b, in[1] = rr;
    c = remat_graph_add(g, REMAT_OP_CONCAT, in, 2, NULL, "c");
    d = remat_graph_add(g, REMAT_OP_DROPOUT, &c, 1, NULL, "d");
    f = remat_graph_add(g, REMAT_OP_FLATTEN, &d, 1, NULL, "flat");
    l = remat_graph_add(g, REMAT_OP_LINEAR, &f, 1, &(remat_attrs){.out_channels = 5}, "fc");
    in[0] = l, in[1] = lab;
    loss = remat_graph_add(g, REMAT_OP_SOFTMAX_CE, in, 2, NULL, "ce");
    REMAT_ASSERT_TEST(loss >= 0 && remat_graph_set_loss(g, loss) == REMAT_OK);
    tg = to_tgraph(g, REMAT_COST_DEFAULT);

    CHECK_I64(remat_tgraph_n_planned(tg), 8);
    CHECK_OK(remat_plan_none(tg, &s));
    if (s) {
        size_t n = remat_schedule_n_steps(s), k = 0, live[64];
        const remat_step *st = remat_schedule_steps(s);

        CHECK_OK(remat_sim_run(tg, s, &r));
        CHECK_I64(r.activation_peak_bytes, 704);
        /* 2 * (512 + 128 + 128 + 256 + 256 + 64 * 3) */
        CHECK_I64(r.naive_bytes, 2 * 1472);
        /* FWD pool reads a (512), writes b (128); BWD pool reads g(b) (128), writes
         * g(a) (512): 640 each; BWD fc reads d, g(logits), writes g(d): 576 */
        CHECK_I64(r.lower_bound_bytes, 640);
        REMAT_ASSERT_TEST(n <= LEN(live));
        CHECK_OK(remat_sim_timeline(tg, s, live, n));
        for (size_t i = 0; i < n; i++) {
            if (st[i].kind == REMAT_STEP_FREE)
                continue;
            if (k < LEN(want_after_op))
                CHECK(live[i] == want_after_op[k], "after op step %zu: %zu, expected %zu",
                      k, live[i], want_after_op[k]);
            k++;
        }
        /* 8 FWD, 7 BWD (not flatten) */
        CHECK_I64(k, 15);
        CHECK_I64(live[n - 1], 0);
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * The `none` schedule of the diamond with b sent to the host tier between its last
 * forward reader (add) and its backward reader (relu b's BWD). Live device bytes after
 * each step on the right; the host tier holds b (256) from step 5 to step 24.
 */
static const remat_step diamond_offload[] = {
    FW(0),                   /* +a                      256 */
    FW(1), FR(D_A),           /* +b 512 -> a             256 */
    FW(2),                   /* +c                      512 */
    FW(3),                   /* +d                      768 */
    OF(D_B), WT(D_B), FR(D_B), /* b out: 768, 768 ->     512 */
    FW(4),                   /* view                    512 */
    FW(5),                   /* +logits                 576 */
    FW(6), FR(D_LOGITS), FR(D_LOSS), /* +loss +probs 704 -> 576 */
    BW(6), FR(D_PROBS),       /* +g(logits) 640 ->       576 */
    BW(5), FR(D_D), FR(G_LOGITS), /* +g(d) 832 ->        512 */
    BW(3), FR(G_D),           /* +g(b) +g(c) 1024 ->     768 */
    PF(D_B),                 /* b back: +256            1024 */
    BW(2), FR(D_C), FR(G_C),   /* 1024 ->                 512 */
    WT(D_B),                 /*                         512 */
    BW(1), FR(D_B), FR(G_B),   /* +g(a) 768 ->            256 */
    BW(0), FR(G_A),           /* 256 ->                    0 */
};

static void test_offload(void)
{
    static const size_t want_live[] = {
        256, 512, 256, 512, 768, 768, 768, 512, 512, 576, 704, 640, 576, 640, 576, 832, 576,
        512, 1024, 768, 1024, 1024, 768, 512, 512, 768, 512, 256, 256, 0,
    };
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);
    remat_schedule *s = make_schedule(diamond_offload, LEN(diamond_offload));
    remat_sim_result r;
    size_t live[LEN(diamond_offload)];

    CHECK(LEN(want_live) == LEN(diamond_offload), "fixture: %zu steps, %zu figures",
          LEN(diamond_offload), LEN(want_live));
    CHECK_OK(remat_sim_timeline(tg, s, live, LEN(live)));
    for (size_t i = 0; i < LEN(want_live); i++)
        CHECK(live[i] == want_live[i], "live after step %zu = %zu, expected %zu", i, live[i],
              want_live[i]);
    /* the peak: 1024 at BWD add (none's was 1280 there: b no longer on the device) */
    CHECK_OK(remat_sim_run(tg, s, &r));
    CHECK_I64(r.activation_peak_bytes, 1024);
    CHECK_I64(r.peak_step, 18);
    CHECK_I64(r.host_peak_bytes, 256);
    CHECK_I64(r.transfer_bytes, 512);
    /* Time. Copies of 256 bytes at 256 B/s take 1 s each. With compute ~free, each WAIT
     * waits for its whole copy: 2 s of stalls. */
    {
        remat_sim_opts o = {.bandwidth = 256, .flops = 1e30};

        CHECK_OK(remat_sim_run_opts(tg, s, &o, &r));
        CHECK(fabs(r.transfer_seconds - 2) < 1e-9, "transfer %g s", r.transfer_seconds);
        CHECK(fabs(r.stall_seconds - 2) < 1e-9, "stalls %g s", r.stall_seconds);
        CHECK(fabs(r.total_seconds - 2) < 1e-9, "total %g s", r.total_seconds);
    }
    /* With every op taking over 1 s (1 mFLOP/s), the copy back hides behind BWD relu c
     * (steps 20-24); the copy out has nothing between OFFLOAD and WAIT: 1 s of stall. */
    {
        remat_sim_opts o = {.bandwidth = 256, .flops = 1e-3};

        CHECK_OK(remat_sim_run_opts(tg, s, &o, &r));
        CHECK(r.compute_seconds > 13 * 1000, "compute %g s", r.compute_seconds);
        CHECK(fabs(r.stall_seconds - 1) < 1e-6, "stalls %g s", r.stall_seconds);
        CHECK(fabs(r.total_seconds - (r.compute_seconds + 1)) < 1e-6, "total %g s, compute "
              "%g s", r.total_seconds, r.compute_seconds);
    }
    /* A copy that is instant stalls nothing. */
    {
        remat_sim_opts o = {.bandwidth = 1e30, .flops = 1e9};

        CHECK_OK(remat_sim_run_opts(tg, s, &o, &r));
        CHECK(r.stall_seconds < 1e-20 && r.total_seconds == r.compute_seconds,
              "stalls %g s", r.stall_seconds);
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/* Every misuse of the host tier, each rejected at the step that commits it. */
static void test_offload_invalid(void)
{
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);

    {
        /* FREE while the copy out is still reading b */
        static const remat_step s[] = {FW(0), FW(1), FR(D_A), FW(2), FW(3), OF(D_B), FR(D_B)};
        CHECK_INVALID(tg, s, 6);
    }
    {
        /* a gradient is not offloaded */
        static const remat_step s[] = {FW(0), FW(1), FW(2), FW(3), FW(4), FW(5), FW(6),
                                       BW(6), OF(G_LOGITS)};
        CHECK_INVALID(tg, s, 8);
    }
    {
        /* a value that is not live (a freed) */
        static const remat_step s[] = {FW(0), FW(1), FR(D_A), OF(D_A)};
        CHECK_INVALID(tg, s, 3);
    }
    {
        /* offloaded twice */
        static const remat_step s[] = {FW(0), FW(1), OF(D_B), WT(D_B), OF(D_B)};
        CHECK_INVALID(tg, s, 4);
    }
    {
        /* PREFETCH of a value never offloaded, and of one still live */
        static const remat_step s1[] = {FW(0), FW(1), FR(D_B), PF(D_B)};
        static const remat_step s2[] = {FW(0), FW(1), OF(D_B), WT(D_B), PF(D_B)};
        CHECK_INVALID(tg, s1, 3);
        CHECK_INVALID(tg, s2, 4);
    }
    {
        /* WAIT with no copy under way */
        static const remat_step s[] = {FW(0), FW(1), WT(D_B)};
        CHECK_INVALID(tg, s, 2);
    }
    {
        /* relu c reads b while its copy back is under way */
        static const remat_step s[] = {FW(0), FW(1), OF(D_B), WT(D_B), FR(D_B), PF(D_B), FW(2)};
        CHECK_INVALID(tg, s, 6);
    }
    {
        /* relu b recomputes b while its copy sits on the host tier */
        static const remat_step s[] = {FW(0), FW(1), OF(D_B), WT(D_B), FR(D_B), FW(1)};
        CHECK_INVALID(tg, s, 5);
    }
    {
        /* the diamond's offload schedule without the last WAIT: the copy back is never
         * waited for (BWD relu b then reads it: rejected there) */
        remat_step s[LEN(diamond_offload) - 1];
        size_t n = 0;

        for (size_t i = 0; i < LEN(diamond_offload); i++)
            if (i != 24)
                s[n++] = diamond_offload[i];
        CHECK_INVALID(tg, s, 24);
    }
    {
        /* b goes out and is never brought back (it stays live too, and is freed at the
         * end): the schedule ends with a copy on the host tier */
        remat_step s[LEN(diamond_none) + 2];
        size_t n = 0;

        for (size_t i = 0; i < LEN(diamond_none); i++) {
            s[n++] = diamond_none[i];
            if (i == 4) {
                s[n++] = (remat_step)OF(D_B);
                s[n++] = (remat_step)WT(D_B);
            }
        }
        CHECK_INVALID(tg, s, (int)LEN(s));
    }
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

/*
 * The diamond with b and c sent out after add (their last forward reader) and brought
 * back before relu c's backward: both copies out overlap FWD linear, the copy of b back
 * overlaps BWD relu c.
 */
static const remat_step diamond_two_copies[] = {
    FW(0), FW(1), FR(D_A), FW(2), FW(3),
    OF(D_B), OF(D_C),                          /* steps 5, 6 */
    FW(4), FW(5),                              /* view, linear */
    WT(D_B), WT(D_C), FR(D_B), FR(D_C),        /* steps 9-12 */
    FW(6), FR(D_LOGITS), FR(D_LOSS),
    BW(6), FR(D_PROBS),
    BW(5), FR(D_D), FR(G_LOGITS),
    BW(3), FR(G_D),
    PF(D_C), PF(D_B), WT(D_C),                 /* steps 23-25 */
    BW(2), FR(D_C), FR(G_C),                   /* relu c: reads c */
    WT(D_B),
    BW(1), FR(D_B), FR(G_B),
    BW(0), FR(G_A),
};

/*
 * The time model with a copy slowdown s, on diamond_two_copies at 128 FLOP/s and 64 B/s
 * (each 256-byte copy takes 4 s). The diamond's FLOPs (op_table.c's formulas): forward
 * conv 2*64*2 = 256, relu b 64, relu c 64, add 64, flatten 0, linear 2*3*64 = 384,
 * softmax_ce 5*3+1 = 16 (848); backward conv 512, relu 64 each, add 128, linear 768,
 * softmax_ce 6 (1542); 2390 in all, 18.671875 s at full rate. At rate r = 128 (1 - s)
 * while a copy is under way:
 *   FW conv..add: 2 + 0.5 + 0.5 + 0.5, clock 3.5; b out on [3.5, 7.5), c out [7.5, 11.5).
 *   FW linear, 384 FLOPs from 3.5 with 8 s of copies ahead:
 *     s = 0: 3 s (6.5); WAIT b stalls 1, WAIT c 4: clock 11.5.
 *     s = 0.5: r = 64, 512 >= 384 in 8 s: 6 s (9.5); WAIT b 0, WAIT c 2: 11.5.
 *     s = 0.75: r = 32, 256 in 8 s, then 128 at 128: 9 s (12.5); no stalls.
 *     s = 1: r = 0: 8 + 3 = 11 s (14.5); no stalls.
 *   Then FW ce 0.125, BW ce 0.046875, BW linear 6, BW add 1: clock T = 11.5 + 7.171875
 *   = 18.671875 for s = 0, 0.5; 19.671875 for 0.75; 21.671875 for 1.
 *   c back on [T, T + 4), b back [T + 4, T + 8); WAIT c stalls 4 in every case.
 *   BW relu c, 64 FLOPs at T + 4 with 4 s of b's copy ahead:
 *     s = 0: 0.5 s, WAIT b stalls 3.5.   s = 0.5: r = 64: 1 s, WAIT b 3.
 *     s = 0.75: r = 32: 2 s, WAIT b 2.   s = 1: 4 + 0.5 = 4.5 s, WAIT b 0.
 *   BW relu b 0.5, BW conv 4.
 * compute = 18.671875 + (linear's and relu c's extra time): +0, +3.5, +7.5, +12;
 * stalls 1+4+4+3.5 = 12.5, 2+4+3 = 9, 4+2 = 6, 4; total = compute + stalls.
 */
static void test_copy_slowdown(void)
{
    static const struct {
        double s, compute, stall, total;
    } want[] = {
        {0, 18.671875, 12.5, 31.171875},
        {0.5, 22.171875, 9, 31.171875},
        {0.75, 26.171875, 6, 32.171875},
        {1, 30.671875, 4, 34.671875},
    };
    remat_graph *g = build_diamond();
    remat_tgraph *tg = to_tgraph(g, REMAT_COST_DEFAULT);
    remat_schedule *s = make_schedule(diamond_two_copies, LEN(diamond_two_copies));
    remat_sim_result r;

    for (size_t i = 0; i < LEN(want); i++) {
        remat_sim_opts o = {.bandwidth = 64, .flops = 128, .copy_slowdown = want[i].s};

        CHECK_OK(remat_sim_run_opts(tg, s, &o, &r));
        CHECK(fabs(r.compute_seconds - want[i].compute) <= 1e-12 * want[i].compute,
              "s %g: compute %.17g s, expected %g", want[i].s, r.compute_seconds,
              want[i].compute);
        CHECK(fabs(r.stall_seconds - want[i].stall) <= 1e-12 * want[i].stall,
              "s %g: stalls %.17g s, expected %g", want[i].s, r.stall_seconds, want[i].stall);
        CHECK(fabs(r.total_seconds - want[i].total) <= 1e-12 * want[i].total,
              "s %g: total %.17g s, expected %g", want[i].s, r.total_seconds, want[i].total);
        CHECK(r.transfer_seconds == 16, "s %g: transfer %g s, expected 16", want[i].s,
              r.transfer_seconds);
        CHECK_I64(r.transfer_bytes, 1024);
        /* 1024 after PREFETCH b: d is gone, g(b), g(c), b, c live; the host holds b, c */
        CHECK_I64(r.activation_peak_bytes, 1024);
        CHECK_I64(r.peak_step, 24);
        CHECK_I64(r.host_peak_bytes, 512);
    }
    /* without copies a slowdown changes nothing: 2390 FLOPs at 128 FLOP/s */
    {
        remat_schedule *n = make_schedule(diamond_none, LEN(diamond_none));
        remat_sim_opts o = {.bandwidth = 64, .flops = 128, .copy_slowdown = 1};

        CHECK_OK(remat_sim_run_opts(tg, n, &o, &r));
        CHECK(r.total_seconds == 18.671875 && r.compute_seconds == 18.671875,
              "total %.17g s, compute %.17g s", r.total_seconds, r.compute_seconds);
        remat_schedule_free(n);
    }
    /* a slowdown outside [0, 1] is the caller's error */
    {
        static const double bad_s[] = {-0.25, 1.5, NAN};

        for (size_t i = 0; i < LEN(bad_s); i++) {
            remat_sim_opts o = {.copy_slowdown = bad_s[i]};
            remat_status st = remat_sim_run_opts(tg, s, &o, &r);

            CHECK(st == REMAT_ERR_ARG, "slowdown %g: %s", bad_s[i], remat_status_name(st));
        }
    }
    remat_schedule_free(s);
    remat_tgraph_free(tg);
    remat_graph_free(g);
}

int main(void)
{
    RUN(test_diamond_none);
    RUN(test_diamond_invalid);
    RUN(test_recompute);
    RUN(test_liveness);
    RUN(test_chain_concat);
    RUN(test_offload);
    RUN(test_offload_invalid);
    RUN(test_copy_slowdown);
    return harness_end();
}
