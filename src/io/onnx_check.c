/*
 * onnx_check.c - reading an ONNX file from disk (remat_onnx_read), and the coverage check
 * behind `remat plan FILE.onnx --check`: which op types remat lacks, each with its count
 * and first node, and, when every type maps, whether the whole model reads.
 */
#include "io/onnx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define ONNX_MAX_BYTES ((size_t)1 << 31)

/* The file at path read whole, then through onnx_read_mem. */
static remat_status read_file(const char *path, const remat_onnx_opts *o,
                              const remat_allocator *a, remat_graph **graph,
                              remat_onnx_weights **weights, struct onnx_cover *c)
{
    FILE *f;
    long size;
    void *buf = NULL;
    struct stat sb;
    remat_status st;

    if (!path)
        return REMAT_FAIL(REMAT_ERR_ARG, "no file name");
    f = fopen(path, "rb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!fstat(fileno(f), &sb) && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_IO, "%s: is a directory", path);
    }
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_IO, "cannot read '%s'", path);
    }
    if ((size_t)size > ONNX_MAX_BYTES) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: %ld bytes; ONNX files stop at 2 GiB",
                          path, size);
    }
    buf = core_alloc(a, (size_t)size + 1);
    if (!buf) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory reading %ld bytes", path, size);
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        core_free(a, buf, (size_t)size + 1);
        return REMAT_FAIL(REMAT_ERR_IO, "cannot read '%s'", path);
    }
    fclose(f);
    st = onnx_read_mem(buf, (size_t)size, path, o, a, graph, weights, c);
    core_free(a, buf, (size_t)size + 1);
    return st;
}

remat_status remat_onnx_read(const char *path, const remat_onnx_opts *o,
                             const remat_allocator *a, remat_graph **graph,
                             remat_onnx_weights **weights)
{
    if (!graph || !weights)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the graph or the weights");
    return read_file(path, o, a, graph, weights, NULL);
}

remat_status onnx_check(const char *path, const remat_onnx_opts *o, struct onnx_cover *c)
{
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    remat_status st;

    c->opset = -1;
    st = read_file(path, o, NULL, &g, &w, c);
    c->n_ops = st ? 0 : remat_graph_n_ops(g);
    remat_graph_free(g);
    remat_onnx_weights_free(w);
    return st;
}
