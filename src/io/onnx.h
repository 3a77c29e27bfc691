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

/* What `remat plan --check` reports: the op types remat does not read (each with its
 * count and first node) and, when every type maps, how the whole read went. */
#define ONNX_COVER_MAX 64
struct onnx_gap {
    char type[64], domain[64], first_name[96];
    size_t count, first;   /* nodes of this type, the index of the first */
};

struct onnx_cover {
    int opset;             /* -1 when the file does not get that far */
    size_t n_nodes, gap_nodes, n_gaps, more; /* more: types past ONNX_COVER_MAX */
    struct onnx_gap gap[ONNX_COVER_MAX];
    int32_t n_ops;         /* the graph's ops when the read succeeded */
};

/* Reads the model at path as remat_onnx_read does, filling c (which the caller zeroes):
 * REMAT_OK when every node maps and the graph builds, else the read's status and
 * message (REMAT_ERR_UNSUPPORTED with the list of gaps when op types are missing). */
remat_status onnx_check(const char *path, const remat_onnx_opts *o, struct onnx_cover *c);
/* remat_onnx_read_buffer, filling c when not NULL (onnx.c). */
remat_status onnx_read_mem(const void *data, size_t n, const char *label,
                           const remat_onnx_opts *o, const remat_allocator *a,
                           remat_graph **graph, remat_onnx_weights **weights,
                           struct onnx_cover *c);

#endif
