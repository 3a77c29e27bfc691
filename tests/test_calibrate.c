/*
 * test_calibrate.c - remat_calibrate: the time model's rates measured on this machine
 * and cached (src/exec/calibrate.c).
 *
 * REMAT_CALIBRATE=0 and the cuda backend give the defaults without measuring or
 * caching; bad arguments are rejected. With calibration on (cpu backend, 1 thread) the
 * figures are plausible, the measured compute rate is within a factor of 2 of
 * dnnl_sgemm timed here by the test itself, and a second call returns the same figures
 * from the cache file (and quickly); a cache file holding figures written by the test
 * gives them back, and a corrupted one is replaced. A cache directory that cannot be
 * made is not an error, and without XDG_CACHE_HOME the cache goes under
 * $HOME/.cache/remat. Each test sets XDG_CACHE_HOME (and HOME) to a fresh temporary
 * folder with setenv and removes it after.
 */
#include "harness.h"

#include <dirent.h>
#include <ftw.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Plausible rates on any CPU remat runs on (the brief's bounds). */
#define FLOPS_LO 1e9
#define FLOPS_HI 1e13
#define BW_LO 1e8
#define BW_HI 1e12

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A fresh temporary folder (into dir, 256 bytes) set as XDG_CACHE_HOME. */
static void fresh_cache(char *dir)
{
    snprintf(dir, 256, "/tmp/remat_calib_XXXXXX");
    REMAT_ASSERT_TEST(mkdtemp(dir) != NULL);
    REMAT_ASSERT_TEST(setenv("XDG_CACHE_HOME", dir, 1) == 0);
}

static void remove_tree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The number of files in dir (-1 when it cannot be opened); the last one's path into
 * path (512 bytes) when path is not NULL. */
static int list_files(const char *dir, char *path)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            n++;
            if (path)
                snprintf(path, 512, "%s/%s", dir, e->d_name);
        }
    closedir(d);
    return n;
}

/* The whole text of a small file into buf (n bytes); false when it cannot be read. */
static bool read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t got;

    if (!f)
        return false;
    got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    return true;
}

static bool write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    bool ok;

    if (!f)
        return false;
    ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static remat_train_opts opts(remat_backend_kind b, int threads)
{
    remat_train_opts o = remat_train_opts_default();

    o.backend = b;
    o.threads = threads;
    return o;
}

/* Checks measured figures are plausible for the given compute range. */
static void check_plausible(const char *what, double f, double bw, double s, double f_lo,
                            double f_hi)
{
    CHECK(f >= f_lo && f <= f_hi, "%s: flops %g outside [%g, %g]", what, f, f_lo, f_hi);
    CHECK(bw >= BW_LO && bw <= BW_HI, "%s: bandwidth %g outside [%g, %g]", what, bw, BW_LO,
          BW_HI);
    CHECK(s >= 0 && s <= 1, "%s: copy slowdown %g outside [0, 1]", what, s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* dnnl_sgemm 1024^3 on one thread timed here: the median of 7 runs after a warm-up, in
 * FLOP/s (2 FLOPs per multiply-add). */
static double sgemm_rate_1t(void)
{
    const int64_t n = 1024;
    float *a = malloc(sizeof(float) * (size_t)(n * n)), *b = malloc(sizeof(float) * (size_t)(n * n));
    float *c = calloc((size_t)(n * n), sizeof(float));
    int saved = omp_get_max_threads();
    double t[7];

    REMAT_ASSERT_TEST(a && b && c);
    for (int64_t i = 0; i < n * n; i++) {
        a[i] = (float)(i % 13) * 0.1f;
        b[i] = (float)(i % 7) * 0.2f - 0.5f;
    }
    omp_set_num_threads(1);
    for (int r = -1; r < 7; r++) {
        double t0 = now();

        REMAT_ASSERT_TEST(dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) ==
                          dnnl_success);
        if (r >= 0)
            t[r] = now() - t0;
    }
    qsort(t, 7, sizeof *t, cmp_double);
    omp_set_num_threads(saved);
    free(a);
    free(b);
    free(c);
    return 2.0 * (double)(n * n * n) / t[3];
}

/* ------------------------------------------------------------------ tests */

static void test_args(void)
{
    remat_train_opts o = opts(REMAT_BACKEND_CPU, 1), bad_b = opts(REMAT_BACKEND_COUNT, 1);
    remat_train_opts bad_t = opts(REMAT_BACKEND_CPU, -1);
    double f = -1, bw = -1, s = -1;

    CHECK(remat_calibrate(NULL, &f, &bw, &s) == REMAT_ERR_ARG, "NULL options accepted");
    CHECK(remat_calibrate(&o, NULL, &bw, &s) == REMAT_ERR_ARG, "NULL flops accepted");
    CHECK(remat_calibrate(&o, &f, NULL, &s) == REMAT_ERR_ARG, "NULL bandwidth accepted");
    CHECK(remat_calibrate(&o, &f, &bw, NULL) == REMAT_ERR_ARG, "NULL slowdown accepted");
    CHECK(remat_calibrate(&bad_b, &f, &bw, &s) == REMAT_ERR_ARG, "unknown backend accepted");
    CHECK(remat_calibrate(&bad_t, &f, &bw, &s) == REMAT_ERR_ARG, "-1 threads accepted");
    CHECK(f == -1 && bw == -1 && s == -1, "results written on an error: %g %g %g", f, bw, s);
}

/* REMAT_CALIBRATE=0: the defaults for every backend, nothing measured or written. */
static void test_disabled(void)
{
    char dir[256], sub[300];
    double t0;

    fresh_cache(dir);
    setenv("REMAT_CALIBRATE", "0", 1);
    for (int b = 0; b < REMAT_BACKEND_COUNT; b++) {
        remat_train_opts o = opts((remat_backend_kind)b, 1);
        double f, bw, s;

        t0 = now();
        CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
        CHECK(f == REMAT_DEFAULT_FLOPS && bw == REMAT_DEFAULT_BANDWIDTH && s == 0,
              "%s: %g %g %g, expected the defaults", remat_backend_name(o.backend), f, bw, s);
        CHECK(now() - t0 < 0.2, "%s: %g s without measuring", remat_backend_name(o.backend),
              now() - t0);
    }
    snprintf(sub, sizeof sub, "%s/remat", dir);
    CHECK(list_files(sub, NULL) == -1, "REMAT_CALIBRATE=0 made %s", sub);
    unsetenv("REMAT_CALIBRATE");
    remove_tree(dir);
}

/* The cuda backend: the defaults with no slowdown (its own copy engine), no cache. */
static void test_cuda(void)
{
    remat_train_opts o = opts(REMAT_BACKEND_CUDA, 0);
    char dir[256], sub[300];
    double f, bw, s;

    fresh_cache(dir);
    unsetenv("REMAT_CALIBRATE");
    CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
    CHECK(f == REMAT_DEFAULT_FLOPS && bw == REMAT_DEFAULT_BANDWIDTH && s == 0,
          "cuda: %g %g %g, expected the defaults", f, bw, s);
    snprintf(sub, sizeof sub, "%s/remat", dir);
    CHECK(list_files(sub, NULL) <= 0, "cuda wrote a cache file");
    remove_tree(dir);
}

/*
 * cpu, 1 thread: measured, plausible, within 2x of the test's own sgemm timing; cached
 * (one file, the same figures again, quickly); figures the test writes into the file come
 * back; corrupted files are replaced; 2 threads get a file of their own. The machine may
 * be shared with other work that moves both timings: the comparison is made up to
 * twice, the second time measured afresh (the cache file removed), and the test passes
 * when either attempt agrees.
 */
static void test_cpu_cache(void)
{
    remat_train_opts o = opts(REMAT_BACKEND_CPU, 1), o2 = opts(REMAT_BACKEND_CPU, 2);
    char dir[256], sub[300], path[512], text[2048], head[1024];
    double f, bw, s, f2, bw2, s2, t0, mine;
    char *p;

    fresh_cache(dir);
    unsetenv("REMAT_CALIBRATE");
    snprintf(sub, sizeof sub, "%s/remat", dir);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (attempt)
            remove(path);
        mine = sgemm_rate_1t();
        t0 = now();
        CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
        t0 = now() - t0;
        printf("  cpu 1 thread: %.4g FLOP/s (sgemm timed here %.4g), %.4g B/s, slowdown "
               "%.3f, %.2f s\n", f, mine, bw, s, t0);
        check_plausible("cpu 1 thread", f, bw, s, FLOPS_LO, FLOPS_HI);
        CHECK(t0 < 5, "measuring took %g s (about a second expected)", t0);
        CHECK_OR(list_files(sub, path) == 1, goto out, "%d files in %s, expected 1",
                 list_files(sub, NULL), sub);
        if (f > mine / 2 && f < mine * 2)
            break;
        CHECK(attempt == 0, "calibrated %g FLOP/s, sgemm timed here %g", f, mine);
    }

    /* the second call reads the file: the same bits (a measurement would differ), fast */
    t0 = now();
    CHECK_OK(remat_calibrate(&o, &f2, &bw2, &s2));
    t0 = now() - t0;
    CHECK(f2 == f && bw2 == bw && s2 == s, "cached %.17g %.17g %.17g, measured %.17g %.17g "
          "%.17g", f2, bw2, s2, f, bw, s);
    CHECK(t0 < 0.2, "the cached call took %g s", t0);

    /* figures written into the file by hand come back (the file's first four lines, the
     * header naming machine, backend and threads, kept) */
    CHECK_OR(read_text(path, text, sizeof text), goto out, "cannot read %s", path);
    p = text;
    for (int i = 0; i < 4 && p; i++)
        p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    CHECK_OR(p != NULL, goto out, "cache file has no 4-line header: '%s'", text);
    snprintf(head, sizeof head, "%.*s", (int)(p - text), text);
    snprintf(text, sizeof text, "%sflops 1.5e11\nbandwidth 7.25e9\ncopy_slowdown 0.25\n", head);
    REMAT_ASSERT_TEST(write_text(path, text));
    CHECK_OK(remat_calibrate(&o, &f2, &bw2, &s2));
    CHECK(f2 == 1.5e11 && bw2 == 7.25e9 && s2 == 0.25, "from the edited cache: %g %g %g",
          f2, bw2, s2);

    /* REMAT_CALIBRATE=again: measured now though the file is valid, and the file
     * rewritten with the new figures */
    setenv("REMAT_CALIBRATE", "again", 1);
    CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
    unsetenv("REMAT_CALIBRATE");
    check_plausible("measured again", f, bw, s, FLOPS_LO, FLOPS_HI);
    CHECK(f != 1.5e11 && bw != 7.25e9, "REMAT_CALIBRATE=again gave the cached %g %g", f, bw);
    CHECK_OK(remat_calibrate(&o, &f2, &bw2, &s2));
    CHECK(f2 == f && bw2 == bw && s2 == s, "not rewritten: %g %g %g, then %g %g %g", f, bw,
          s, f2, bw2, s2);

    /* corrupted files: garbage, cut short, a slowdown out of range; each is measured
     * again and rewritten (the figures then come back from the new file) */
    {
        char cut[2048];
        const char *bad[3];

        snprintf(cut, sizeof cut, "%sflops 1.5e11\nbandwidth 7.2", head);
        snprintf(text, sizeof text, "%sflops 1.5e11\nbandwidth 7.25e9\ncopy_slowdown 1.5\n",
                 head);
        bad[0] = "garbage\n\x01\x02";
        bad[1] = cut;
        bad[2] = text;
        for (int i = 0; i < 3; i++) {
            REMAT_ASSERT_TEST(write_text(path, bad[i]));
            CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
            check_plausible("after a corrupted cache", f, bw, s, FLOPS_LO, FLOPS_HI);
            CHECK(f != 1.5e11, "corrupted file %d read as valid", i);
            CHECK_OK(remat_calibrate(&o, &f2, &bw2, &s2));
            CHECK(f2 == f && bw2 == bw && s2 == s, "file %d not rewritten: %g %g %g, then "
                  "%g %g %g", i, f, bw, s, f2, bw2, s2);
        }
    }

    /* another thread count: its own file */
    CHECK_OK(remat_calibrate(&o2, &f, &bw, &s));
    printf("  cpu 2 threads: %.4g FLOP/s, %.4g B/s, slowdown %.3f\n", f, bw, s);
    check_plausible("cpu 2 threads", f, bw, s, FLOPS_LO, FLOPS_HI);
    CHECK(list_files(sub, NULL) == 2, "%d cache files after 1 and 2 threads, expected 2",
          list_files(sub, NULL));
out:
    remove_tree(dir);
}

/*
 * The ref backend (its conv2d on one thread: slower, so a wider range), with the cache
 * under $HOME/.cache/remat when XDG_CACHE_HOME is relative (the XDG rule), and a cache
 * that cannot be made (HOME a regular file) not an error.
 */
static void test_ref_home(void)
{
    remat_train_opts o = opts(REMAT_BACKEND_REF, 4);
    char dir[256], sub[300], file[300];
    double f, bw, s;

    fresh_cache(dir);
    unsetenv("REMAT_CALIBRATE");
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    setenv("HOME", dir, 1);
    CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
    printf("  ref: %.4g FLOP/s, %.4g B/s, slowdown %.3f\n", f, bw, s);
    check_plausible("ref", f, bw, s, 1e7, 1e12);
    snprintf(sub, sizeof sub, "%s/.cache/remat", dir);
    CHECK(list_files(sub, NULL) == 1, "%d files in %s, expected 1", list_files(sub, NULL), sub);

    snprintf(file, sizeof file, "%s/plain-file", dir);
    REMAT_ASSERT_TEST(write_text(file, "not a folder\n"));
    setenv("HOME", file, 1);
    CHECK_OK(remat_calibrate(&o, &f, &bw, &s));
    check_plausible("ref, cache not writable", f, bw, s, 1e7, 1e12);
    remove_tree(dir);
}

int main(void)
{
    const char *home = getenv("HOME");
    char saved_home[512];

    snprintf(saved_home, sizeof saved_home, "%s", home ? home : "");
    RUN(test_args);
    RUN(test_disabled);
    RUN(test_cuda);
    RUN(test_cpu_cache);
    RUN(test_ref_home);
    if (home)
        setenv("HOME", saved_home, 1);
    return harness_end();
}
