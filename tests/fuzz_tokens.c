/*
 * fuzz_tokens.c - libFuzzer target: any bytes through the token-data reader of
 * `remat train --data` for language models (remat_tokens_open, src/io/tokens.c), and
 * when a file opens, batches drawn from it: every id and target below the vocabulary,
 * each target the id after it. Each input is written to one memory file (memfd) and
 * opened through /proc/self/fd. A malformed file must come back as an error; anything
 * ASan, UBSan or libFuzzer's checks catch is a finding. Built and run by `make fuzz`.
 */
#include "fuzz_file.h"
#include "remat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    enum { B = 3, S_MAX = 16 };
    remat_tokens *t = NULL;
    int32_t ids[B * S_MAX], targets[B * S_MAX];
    int64_t count, vocab, s;

    if (remat_tokens_open(as_file(data, n), &t) != REMAT_OK)
        return 0;
    count = remat_tokens_count(t);
    vocab = remat_tokens_vocab(t);
    if (count <= 0 || vocab <= 0 || vocab > INT32_MAX)
        abort();
    s = count - 1 < S_MAX ? count - 1 : S_MAX;
    /* a sequence longer than the file allows is refused */
    if (remat_tokens_batch(t, n, 0, B, count, ids, NULL) != REMAT_ERR_ARG)
        abort();
    for (int64_t step = 0; s > 0 && step < 2; step++) {
        if (remat_tokens_batch(t, n, step, B, s, ids, targets) != REMAT_OK)
            abort();
        for (int64_t i = 0; i < B * s; i++)
            if (ids[i] < 0 || ids[i] >= vocab || targets[i] < 0 || targets[i] >= vocab ||
                (i % s + 1 < s && targets[i] != ids[i + 1]))
                abort();
    }
    remat_tokens_free(t);
    return 0;
}
