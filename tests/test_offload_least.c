/*
 * test_offload_least.c - what hybrid reads of its bases without writing or walking the
 * plans they stand for, against those plans:
 *
 * - plan_offload_peak (plan/offload.h), the peak of the schedule plan_offload writes,
 *   worked out from the offload pass's timeline: against the simulator's peak of that
 *   schedule, the same figure to the byte, at target 0 (the least peak, what hybrid
 *   asks) and at random targets up to the schedule's own peak.
 * - sim_seconds_alone (sim/sim.h), a schedule's compute added up: against
 *   remat_sim_run_opts's total_seconds, to the bit, and on a schedule with copies (the
 *   walk's own case) likewise.
 * - hybrid_mc_runs (plan/hybrid.h): against the FWD steps of lower_keep's
 *   memory-centric schedule for the same keep set, and with a cap, above it exactly
 *   when the schedule is.
 *
 * - plan_hybrid below its least budget: what it says it needs, against its least budget.
 * - hybrid's sweep restricted from coarse to fine against the flat sweep (GPT-2-48).
 *
 * Schedules: `none` and lower_keep of random keep sets (speed- and memory-centric) on
 * zoo graphs (ResNet-18, DenseNet-121, U-Net, GPT-2 of 2 layers), each at random
 * bandwidths, compute rates and copy slowdowns. Seed: REMAT_SEED, printed.
 */
#include "harness.h"
#include "plan/hybrid.h"
#include "plan/offload.h"
#include "sched/schedule.h"
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_state, seed;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A failed check (with the library's message) unless st is REMAT_OK. */
static bool ok(remat_status st)
{
    CHECK(st == REMAT_OK, "%s: %s", remat_status_name(st), remat_errmsg());
    return st == REMAT_OK;
}

/* Uniform in [0, 1). */
static double urand01(void)
{
    return (double)(splitmix64() >> 11) / 9007199254740992.0;
}

static remat_tgraph *zoo(const char *name, const remat_zoo_opts *zo)
{
    remat_graph *g = NULL;
    remat_tgraph *tg = NULL;

    if (remat_zoo_build(name, zo, NULL, &g) || remat_tgraph_from_graph(g, NULL, &tg))
        CHECK(false, "%s: %s", name, remat_errmsg());
    remat_graph_free(g);
    return tg;
}

struct tally {
    int schedules, with_copies;
};

/* plan_offload_peak at targets from the least up to s's own peak, against the
 * simulated peak of plan_offload's schedule at each. */
static void check_targets(const remat_tgraph *tg, const remat_schedule *s, const char *what,
                          const remat_sim_opts *so, size_t least, struct tally *t)
{
    size_t top = 0;
    remat_sim_result r;

    if (!ok(remat_sim_run_opts(tg, s, so, &r)))
        return;
    top = r.activation_peak_bytes;
    for (int k = 0; k < 4 && top > least; k++) {
        size_t target = least + (size_t)(urand01() * (double)(top - least)), want = target;
        size_t peak = 0;
        remat_schedule *o = NULL;

        if (ok(plan_offload_peak(tg, s, target, so->bandwidth, so->flops, so->copy_slowdown,
                                 &peak)) &&
            ok(plan_offload(tg, s, NULL, &want, so->bandwidth, so->flops, so->copy_slowdown,
                            &o, NULL)) &&
            ok(remat_sim_run_opts(tg, o, so, &r))) {
            CHECK(peak == r.activation_peak_bytes, "%s at %zu bytes: peak %zu, the offloaded "
                  "plan's simulated peak %zu", what, target, peak, r.activation_peak_bytes);
            t->schedules++;
        }
        remat_schedule_free(o);
    }
}

/* s's least peak and time alone against the plans themselves, at random rates. */
static void check_schedule(const remat_tgraph *tg, const remat_schedule *s, const char *what,
                           struct tally *t)
{
    for (int k = 0; k < 3; k++) {
        /* bandwidth 10^8 .. 10^12 B/s, compute 10^11 .. 10^14 FLOP/s, slowdown in [0, 1] */
        double bw = 1e8 * exp(urand01() * log(1e4)), fl = 1e11 * exp(urand01() * log(1e3));
        double sl = k == 0 ? 0 : k == 1 ? 1 : urand01(), alone = -1;
        remat_sim_opts so = {bw, fl, sl};
        remat_schedule *o = NULL;
        remat_sim_result r, ro;
        size_t least = 0, target = 0;

        if (!ok(plan_offload_peak(tg, s, 0, bw, fl, sl, &least)) ||
            !ok(plan_offload(tg, s, NULL, &target, bw, fl, sl, &o, NULL)) ||
            !ok(remat_sim_run_opts(tg, o, &so, &ro))) {
            remat_schedule_free(o);
            return;
        }
        CHECK(least == ro.activation_peak_bytes, "%s (bandwidth %g, slowdown %g): least "
              "peak %zu, the offloaded plan's simulated peak %zu", what, bw, sl, least,
              ro.activation_peak_bytes);
        t->schedules++;
        check_targets(tg, s, what, &so, target, t);
        if (ok(remat_sim_run_opts(tg, s, &so, &r)) &&
            ok(sim_seconds_alone(tg, s, &so, &alone)))
            CHECK(alone == r.total_seconds, "%s: time alone %.17g, simulated %.17g", what,
                  alone, r.total_seconds);
        /* with copies: the walk's figure */
        if (ro.transfer_bytes && ok(sim_seconds_alone(tg, o, &so, &alone))) {
            CHECK(alone == ro.total_seconds, "%s offloaded: time %.17g, simulated %.17g",
                  what, alone, ro.total_seconds);
            t->with_copies++;
        }
        remat_schedule_free(o);
    }
}

/* The FWD steps of s. */
static int64_t fwd_steps(const remat_schedule *s)
{
    int64_t n = 0;

    for (size_t i = 0; i < s->n; i++)
        n += s->steps[i].kind == REMAT_STEP_FWD;
    return n;
}

/* Random keep sets: hybrid_mc_runs against lower_keep, and each lowering checked. */
static void check_graph(const char *name, const remat_zoo_opts *zo, struct tally *t)
{
    remat_tgraph *tg = zoo(name, zo);
    remat_schedule *s = NULL;
    struct dag d;
    bool *kept = NULL;

    if (!tg)
        return;
    if (ok(remat_plan_none(tg, &s)) && ok(planner_finish(tg, &s)))
        check_schedule(tg, s, name, t);
    remat_schedule_free(s);
    s = NULL;
    if (!ok(dag_build(tg, &d)))
        goto out;
    kept = calloc((size_t)d.n + 1, sizeof *kept);
    for (int round = 0; kept && round < 6; round++) {
        double p = round == 0 ? 0 : round == 1 ? 1 : urand01(); /* share kept */
        int64_t runs = 0, capped = 0, cap;

        for (int32_t v = 0; v < d.n; v++)
            kept[v] = urand01() < p;
        for (int mc = 0; mc < 2; mc++) {
            char what[96];

            snprintf(what, sizeof what, "%s, %.2f kept, %s-centric", name, p,
                     mc ? "memory" : "speed");
            if (!ok(lower_keep(tg, &d, kept, mc == 1, &s)) ||
                !ok(planner_finish(tg, &s)))
                break;
            check_schedule(tg, s, what, t);
            if (mc && ok(hybrid_mc_runs(tg, &d, kept, INT64_MAX, &runs))) {
                CHECK(runs == fwd_steps(s), "%s: %lld forward runs counted, %lld lowered",
                      what, (long long)runs, (long long)fwd_steps(s));
                cap = fwd_steps(s) - 1 - (int64_t)(urand01() * 2 * d.n);
                if (ok(hybrid_mc_runs(tg, &d, kept, cap, &capped)))
                    CHECK((capped > cap) == (fwd_steps(s) > cap), "%s: cap %lld, counted "
                          "%lld of %lld", what, (long long)cap, (long long)capped,
                          (long long)fwd_steps(s));
            }
            remat_schedule_free(s);
            s = NULL;
        }
    }
    free(kept);
    dag_fini(&d);
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
}

static void test_bases(void)
{
    struct tally t = {0};
    remat_zoo_opts one = {.batch = 1};
    remat_zoo_opts gpt = {.batch = 1, .layers = 2, .seq_len = 64};

    rng_state = seed;
    printf("  seed %llu (REMAT_SEED to change)\n", (unsigned long long)seed);
    check_graph("resnet18", &one, &t);
    check_graph("densenet121", &one, &t);
    check_graph("unet", &one, &t);
    check_graph("gpt2", &gpt, &t);
    printf("  %d offloaded peaks at random rates and targets, %d offloaded plans timed\n",
           t.schedules, t.with_copies);
    CHECK(t.schedules > 500 && t.with_copies > 0, "too few cases: %d, %d", t.schedules,
          t.with_copies);
}

/* plan_hybrid below its least budget L (what it gives at budget min, the least peak any
 * base reaches with offload) says it needs L, where remat_plan's fit goes next; at L it
 * plans within L. */
static void test_needs(void)
{
    static const struct {
        const char *net;
        remat_zoo_opts zo;
    } nets[] = {{"resnet18", {.batch = 1}}, {"gpt2", {.batch = 1, .layers = 2, .seq_len = 64}}};

    for (size_t k = 0; k < sizeof nets / sizeof nets[0]; k++) {
        remat_tgraph *tg = zoo(nets[k].net, &nets[k].zo);
        remat_plan_opts o = {.strategy = REMAT_STRATEGY_HYBRID, .budget_min = true};
        remat_plan_info info = {0};
        remat_schedule *s = NULL;
        size_t least = 0, b, peak = 0;
        remat_status st;

        if (!tg || !ok(plan_hybrid(tg, &o, &least, &s, &info, NULL)))
            goto next;
        remat_schedule_free(s);
        s = NULL;
        o.budget_min = false;
        b = least - 1;
        memset(&info, 0, sizeof info);
        st = plan_hybrid(tg, &o, &b, &s, &info, NULL);
        CHECK(st == REMAT_ERR_INFEASIBLE && info.activation_budget_bytes == least,
              "%s: at %zu bytes, one below its least %zu: %s, says it needs %zu", nets[k].net,
              b, least, remat_status_name(st), info.activation_budget_bytes);
        remat_schedule_free(s);
        s = NULL;
        b = least;
        if (ok(plan_hybrid(tg, &o, &b, &s, &info, NULL)) && ok(planner_sim_peak(tg, s, &peak)))
            CHECK(peak <= least, "%s: at its least %zu bytes it peaks at %zu", nets[k].net,
                  least, peak);
    next:
        remat_schedule_free(s);
        remat_tgraph_free(tg);
    }
}

/* Hybrid's sweep restricted from coarse to fine and ended by the DP's beam (the defaults
 * past 1,000 nodes) against the flat sweep of optimal chains on GPT-2 of 48 layers (1,783
 * nodes): at budgets from its least to twice that total, each plan's simulated step no
 * slower than the flat sweep's (equal where measured: docs/planners.md, "Seventeenth
 * round" and "Eighteenth round"). */
static void test_sweep_coarse(void)
{
    remat_zoo_opts zo = {.batch = 1, .layers = 48};
    remat_tgraph *tg = zoo("gpt2", &zo);
    remat_plan_opts o = {.strategy = REMAT_STRATEGY_HYBRID, .budget_min = true};
    remat_plan_info pi;
    remat_schedule *s = NULL;
    size_t least = 0;

    if (!tg || !ok(remat_plan(tg, &o, &s, &pi)))
        goto out;
    least = pi.total_bytes;
    o.budget_min = false;
    for (int k = 0; k < 3; k++) {
        remat_sim_result r[2];
        bool done = true;

        o.budget_bytes = least + least / 2 * (size_t)k;
        for (int flat = 0; flat < 2; flat++) {
            remat_schedule_free(s);
            s = NULL;
            hybrid_set_sweep_coarse(!flat);
            hybrid_set_sweep_near(!flat);
            done = done && ok(remat_plan(tg, &o, &s, &pi)) && ok(remat_sim_run(tg, s, &r[flat]));
        }
        hybrid_set_sweep_coarse(true);
        hybrid_set_sweep_near(true);
        if (done)
            CHECK(r[0].total_seconds <= r[1].total_seconds,
                  "at %zu bytes: %.6f s a step with the coarse sweep, %.6f flat", o.budget_bytes,
                  r[0].total_seconds, r[1].total_seconds);
    }
out:
    remat_schedule_free(s);
    remat_tgraph_free(tg);
}

int main(void)
{
    const char *env = getenv("REMAT_SEED");

    seed = env && *env ? strtoull(env, NULL, 0) : 20261125u;
    RUN(test_bases);
    RUN(test_needs);
    RUN(test_sweep_coarse);
    return harness_end();
}
