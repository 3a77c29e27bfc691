/*
 * fuzz_data.c - libFuzzer target: any bytes through the data-file reader of
 * `remat train --data` (remat_data_open, src/io/data.c), and when a file opens, one
 * batch drawn from it (wrapping around). Each input is written to one memory file
 * (memfd) and opened through /proc/self/fd. A malformed file must come back as an
 * error; anything ASan, UBSan or libFuzzer's checks catch is a finding. Built and run
 * by `make fuzz` (clang).
 */
#include "fuzz_file.h"
#include "remat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    remat_data *d = NULL;
    int64_t chw[3], count;
    float *x;
    int32_t y[3];

    if (remat_data_open(as_file(data, n), &d) != REMAT_OK)
        return 0;
    count = remat_data_count(d);
    remat_data_sample_shape(d, chw);
    if (count <= 0 || chw[0] <= 0 || chw[1] <= 0 || chw[2] <= 0)
        abort();
    /* the file's size bounds the sample (it was read whole) */
    x = malloc(sizeof *x * 3 * (size_t)(chw[0] * chw[1] * chw[2]));
    if (x) {
        remat_data_batch(d, count - 1, 3, x, y); /* wraps past the last sample */
        free(x);
    }
    remat_data_free(d);
    return 0;
}
