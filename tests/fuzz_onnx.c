/*
 * fuzz_onnx.c - libFuzzer target: any bytes through the ONNX reader (remat_onnx_read_
 * buffer). A malformed model must come back as an error; anything ASan, UBSan or
 * libFuzzer's leak and out-of-memory checks catch is a finding. Built and run by
 * `make fuzz` (clang).
 */
#include "remat.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    remat_onnx_opts o = {.batch = n % 3 ? 0 : 3}; /* also the batch override */

    if (remat_onnx_read_buffer(data, n, "fuzz input", &o, NULL, &g, &w) == REMAT_OK) {
        remat_graph_free(g);
        remat_onnx_weights_free(w);
    }
    return 0;
}
