/*
 * fixture_util.h - the PyTorch reference data of the fixture tests (test_fixtures_ops.c,
 * test_fixtures_models.c), written by tools/make_fixtures.py (`make fixtures`) into
 * tests/data/: the readers of its two file formats, record look-up, and the comparisons
 * with the tests' tolerance. Each test program includes this header once.
 *
 * The files (the script's docstring has the full description; all little-endian):
 *   *.fix   "REMATFIX", u32 version 1, u32 n_groups; per group u32 n_records; per
 *           record u32 name_len, name, u32 dtype (0 float32, 1 int32, 2 text), u32 ndim,
 *           i64 dims[ndim], the data. The first record of a group is "name" (text).
 *           ops.fix groups: op (text, remat_op_name), attr.<remat_attrs field>, x0..
 *           (softmax_ce's x1: int32 labels), weight, bias, running_mean, running_var,
 *           r (dL/dy), y, dx0.., dweight, dbias, running_mean.after, running_var.after.
 *           models.fix groups: input0.., labels (int32), loss, grad.<parameter>.
 *   *.prm   remat's parameter file: "REMATPRM", u32 count; per record u32 name_len,
 *           name, u32 ndim, i64 dims[ndim], float32 data.
 * PyTorch computes in float64 from float32 inputs and parameters; its results are
 * rounded to float32 once.
 *
 * Tolerance, every check: |got - want| <= max(REL_TOL |want|, ABS_TOL), REL_TOL 1e-4 and
 * ABS_TOL 1e-5 (the floor covers gradients that are 0 in exact arithmetic, such as a
 * convolution bias before batch norm). Each case prints its worst error / tolerance.
 *
 * Paths are relative to the repository root, where tools/run_tests.sh runs the tests.
 */
#ifndef REMAT_FIXTURE_UTIL_H
#define REMAT_FIXTURE_UTIL_H

#include "harness.h"

#define DATA_DIR "tests/data/"
#define REL_TOL 1e-4
#define ABS_TOL 1e-5

/* ------------------------------------------------------------ fixture files */

enum { DT_F32 = 0, DT_I32 = 1, DT_TEXT = 2 };

struct rec {
    char *name;
    int dtype;
    int ndim;
    int64_t dims[4];
    int64_t n;  /* elements */
    void *data; /* float, int32_t, or text with a NUL after it */
};

struct group {
    uint32_t n;
    struct rec *r;
};

struct fix {
    uint32_t n;
    struct group *g;
};

static inline bool rd(FILE *f, void *p, size_t n)
{
    return fread(p, 1, n, f) == n;
}

static inline void group_fini(struct group *g)
{
    for (uint32_t i = 0; g->r && i < g->n; i++) {
        free(g->r[i].name);
        free(g->r[i].data);
    }
    free(g->r);
    g->r = NULL;
    g->n = 0;
}

/* Reads n records into g; prm: remat's parameter format (no dtype, float32). False on a
 * malformed or truncated file (the records read so far are kept for group_fini). */
static inline bool read_records(FILE *f, uint32_t n, bool prm, struct group *g)
{
    if (n > 100000)
        return false;
    g->n = 0;
    g->r = calloc(n ? n : 1, sizeof *g->r);
    if (!g->r)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        struct rec *r = &g->r[i];
        uint32_t len, dt = DT_F32, nd;
        size_t esz;

        g->n = i + 1;
        if (!rd(f, &len, 4) || len == 0 || len > 255 || !(r->name = calloc(len + 1, 1)) ||
            !rd(f, r->name, len) || (!prm && !rd(f, &dt, 4)) || dt > DT_TEXT ||
            !rd(f, &nd, 4) || nd < 1 || nd > 4 || !rd(f, r->dims, 8 * (size_t)nd))
            return false;
        r->dtype = (int)dt;
        r->ndim = (int)nd;
        r->n = 1;
        for (uint32_t d = 0; d < nd; d++) {
            if (r->dims[d] < 1 || r->dims[d] > (1 << 20))
                return false;
            r->n *= r->dims[d];
        }
        esz = dt == DT_TEXT ? 1 : 4;
        if (r->n > (1 << 28) || !(r->data = calloc((size_t)r->n * esz + 1, 1)) ||
            !rd(f, r->data, (size_t)r->n * esz))
            return false;
    }
    return true;
}

/* Reads a .fix file; false (with a message) when it is missing or malformed. */
static inline bool read_fix(const char *path, struct fix *fx)
{
    FILE *f = fopen(path, "rb");
    char magic[8];
    uint32_t version, n;
    bool ok;

    memset(fx, 0, sizeof *fx);
    if (!f) {
        printf("  cannot open %s (run from the repository root; `make fixtures` makes it)\n",
               path);
        return false;
    }
    ok = rd(f, magic, 8) && !memcmp(magic, "REMATFIX", 8) && rd(f, &version, 4) &&
         version == 1 && rd(f, &n, 4) && n < 10000 && (fx->g = calloc(n ? n : 1, sizeof *fx->g));
    for (uint32_t i = 0; ok && i < n; i++) {
        uint32_t nr;

        fx->n = i + 1;
        ok = rd(f, &nr, 4) && read_records(f, nr, false, &fx->g[i]) && fx->g[i].n > 0 &&
             fx->g[i].r[0].dtype == DT_TEXT && !strcmp(fx->g[i].r[0].name, "name");
    }
    fclose(f);
    if (!ok)
        printf("  %s: not a well-formed fixture file\n", path);
    return ok;
}

static inline void fix_fini(struct fix *fx)
{
    for (uint32_t i = 0; fx->g && i < fx->n; i++)
        group_fini(&fx->g[i]);
    free(fx->g);
    memset(fx, 0, sizeof *fx);
}

/* Reads a REMATPRM file into g (its records, all float32). */
static inline bool read_prm(const char *path, struct group *g)
{
    FILE *f = fopen(path, "rb");
    char magic[8];
    uint32_t n;
    bool ok;

    memset(g, 0, sizeof *g);
    if (!f) {
        printf("  cannot open %s\n", path);
        return false;
    }
    ok = rd(f, magic, 8) && !memcmp(magic, "REMATPRM", 8) && rd(f, &n, 4) &&
         read_records(f, n, true, g);
    fclose(f);
    if (!ok)
        printf("  %s: not a well-formed parameter file\n", path);
    return ok;
}

static inline const struct rec *find_rec(const struct group *g, const char *name)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (!strcmp(g->r[i].name, name))
            return &g->r[i];
    return NULL;
}

/* A float32 record by name, or NULL. */
static inline const float *find_f32(const struct group *g, const char *name, int64_t *n)
{
    const struct rec *r = find_rec(g, name);

    if (!r || r->dtype != DT_F32)
        return NULL;
    if (n)
        *n = r->n;
    return r->data;
}

static inline const char *group_name(const struct group *g)
{
    return g->r[0].data;
}

/* ------------------------------------------------------------- comparisons */

/*
 * Checks got[0..n) against want[0..n): |got - want| <= max(rel |want|, abs_floor) for
 * every element (NaN fails). Returns the worst |got - want| / tolerance.
 */
static inline double check_vals(const char *ctx, const char *what, const float *got,
                                const float *want, int64_t n, double rel, double abs_floor)
{
    int64_t bad = 0, first = -1;
    double worst = 0;

    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double tol = fmax(rel * fabs((double)want[i]), abs_floor);

        if (!(d <= tol)) {
            bad++;
            first = first < 0 ? i : first;
        }
        worst = isnan(d) ? INFINITY : fmax(worst, d / tol);
    }
    CHECK(bad == 0, "%s: %s[%lld] = %.9g, PyTorch %.9g (tolerance %g relative, %g absolute); "
          "%lld of %lld off", ctx, what, (long long)first, first >= 0 ? got[first] : 0.0,
          first >= 0 ? want[first] : 0.0, rel, abs_floor, (long long)bad, (long long)n);
    return worst;
}

/* The same with the test's tolerances. */
static inline double check_fx(const char *ctx, const char *what, const float *got,
                              const float *want, int64_t n)
{
    return check_vals(ctx, what, got, want, n, REL_TOL, ABS_TOL);
}

/* A case's own failure flag: case_begin clears the harness's flag of the running test
 * (returning it) so that a case may stop at its own first failure; case_end ORs it back. */
static inline int case_begin(void)
{
    int was = h_cur_failed;

    h_cur_failed = 0;
    return was;
}

static inline void case_end(int was)
{
    h_cur_failed |= was;
}

#endif
