/*
 * fuzz_dump.c - libFuzzer target: any bytes through the graph-dump reader
 * (remat_tgraph_read_dump, src/io/dump.c). The reader takes a path, so each input is
 * written to one memory file (memfd) and read back through /proc/self/fd. A malformed
 * dump must come back as an error; anything ASan, UBSan or libFuzzer's leak and
 * out-of-memory checks catch is a finding. Built and run by `make fuzz` (clang).
 */
#include "fuzz_file.h"
#include "remat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    remat_tgraph *tg = NULL;
    remat_tgraph_opts o = {.align = n % 2 ? 64 : 0}; /* also the rounding of M_v */

    if (remat_tgraph_read_dump(as_file(data, n), &o, NULL, &tg) == REMAT_OK) {
        /* the accessors a caller reads first must hold */
        if (remat_tgraph_n_planned(tg) > remat_tgraph_n_values(tg) ||
            remat_tgraph_n_ops(tg) < 0 || remat_tgraph_n_params(tg) < 0)
            abort();
        remat_tgraph_free(tg);
    }
    return 0;
}
