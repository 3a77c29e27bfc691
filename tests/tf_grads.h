/*
 * tf_grads.h - gradients against PyTorch float64 for the tests that read exported
 * sequence models (test_onnx_tf.c, test_onnx_rnn.c): each gradient's error relative to
 * the larger of its own norm and the root mean square of every gradient times its
 * size's root (so that a tiny gradient is not held to its own tiny norm), and the check
 * of a trainer's gradients (or float32 PyTorch's own) against the reference group; and
 * that a trainer's parameters are the exported initializers bit for bit.
 */
#ifndef REMAT_TESTS_TF_GRADS_H
#define REMAT_TESTS_TF_GRADS_H

#include "fixture_util.h"

#include <math.h>
#include <string.h>

static double sq(const float *v, int64_t n)
{
    double s = 0;

    for (int64_t i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    return s;
}

static double rms_grad(const struct group *ref)
{
    double s = 0;
    int64_t n = 0;

    for (uint32_t i = 0; i < ref->n; i++)
        if (strcmp(ref->r[i].name, "loss")) {
            s += sq((const float *)ref->r[i].data, ref->r[i].n);
            n += ref->r[i].n;
        }
    return sqrt(s / (double)(n ? n : 1));
}

/* ||got - r|| / max(||r||, rms sqrt(n)) */
static double grad_err(const float *got, const struct rec *r, double rms)
{
    const float *w = (const float *)r->data;
    double d = 0;

    for (int64_t i = 0; i < r->n; i++)
        d += ((double)got[i] - w[i]) * ((double)got[i] - w[i]);
    return sqrt(d) / fmax(fmax(sqrt(sq(w, r->n)), rms * sqrt((double)r->n)), 1e-30);
}

/* The worst grad_err of trainer t's gradients (or of float32 PyTorch's, g32, when t is
 * NULL) against ref, each within tol when tol > 0; *worst_name names it. */
static double check_grads(remat_trainer *t, const struct group *g32, const struct group *ref,
                          double tol, const char *what, const char **worst_name)
{
    double rms = rms_grad(ref), worst = 0;

    for (uint32_t i = 0; i < ref->n; i++) {
        const struct rec *r = &ref->r[i];
        const float *gp = NULL;
        float *p, *tg = NULL;
        int64_t np = 0;
        double err;

        if (!strcmp(r->name, "loss"))
            continue;
        if (t) {
            CHECK_OR(remat_trainer_param(t, r->name, &p, &tg, &np) == REMAT_OK && tg &&
                         np == r->n,
                     continue, "%s: no gradient for '%s'", what, r->name);
        }
        gp = t ? tg : find_f32(g32, r->name, &np);
        CHECK_OR(gp && np == r->n, continue, "%s: no '%s'", what, r->name);
        err = grad_err(gp, r, rms);
        if (err > worst) {
            worst = err;
            *worst_name = r->name;
        }
        if (tol > 0)
            CHECK(err <= tol, "%s: gradient of '%s' off by %.2e (tolerance %.2e)", what,
                  r->name, err, tol);
    }
    return worst;
}

/* Every tensor of init (PyTorch's parameters as exported) is trainer t's parameter of
 * that name, bit for bit. */
static void check_init(remat_trainer *t, const struct group *init, const char *what)
{
    for (uint32_t i = 0; i < init->n; i++) {
        float *p;
        int64_t np;

        CHECK_OR(remat_trainer_param(t, init->r[i].name, &p, NULL, &np) == REMAT_OK &&
                     np == init->r[i].n &&
                     !memcmp(p, init->r[i].data, sizeof(float) * (size_t)np),
                 break, "%s: parameter '%s' is not PyTorch's", what, init->r[i].name);
    }
}

#endif
