/*
 * onnx_weights.c - copying an ONNX file's starting values into a trainer, by name.
 */
#include "io/onnx.h"

#include <string.h>

remat_status remat_onnx_weights_apply(const remat_onnx_weights *w, remat_trainer *t)
{
    if (!w || !t)
        return REMAT_FAIL(REMAT_ERR_ARG, "no weights or no trainer");
    for (size_t i = 0; i < w->n; i++) {
        float *dst;
        int64_t n;
        remat_status st = remat_trainer_param(t, w->w[i].name, &dst, NULL, &n);

        if (st)
            return st;
        if (n != w->w[i].n)
            return REMAT_FAIL(REMAT_ERR_ARG, "'%s': the file gives %lld values, the trainer "
                              "holds %lld", w->w[i].name, (long long)w->w[i].n, (long long)n);
        memcpy(dst, w->w[i].data, sizeof(float) * (size_t)n);
    }
    return REMAT_OK;
}
