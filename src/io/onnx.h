/*
 * onnx.h - the starting values an ONNX file gives (remat_onnx_weights), shared by the
 * reader (onnx.c) and the code that copies them into a trainer (onnx_weights.c), which
 * is apart so that the reader links without the runtime (the fuzz target).
 */
#ifndef REMAT_IO_ONNX_H
#define REMAT_IO_ONNX_H

#include "core/core.h"

struct wrec {
    char *name;
    float *data;
    int64_t n;
};

struct remat_onnx_weights {
    remat_allocator al;
    struct wrec *w;
    size_t n, cap;
    int32_t output;    /* the value of the graph's output (the logits) */
};

#endif
