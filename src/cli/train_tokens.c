/*
 * train_tokens.c - remat train --data for a language model. The graph's int32 values
 * (remat_graph_token_values) say what feeds what: the first token-id value (an
 * embedding's input, e.g. "input_ids") gets the file's sequences, every token_ce target
 * value of the same size the tokens after them (the ids shifted by one); other id values
 * (BERT's token_type_ids) are drawn, positions filled by the trainer. The file's
 * vocabulary must fit every reader of what it feeds. One batch of ids and targets is
 * allocated at opening; a step draws into it and trains.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

/* The graph's int32 values, described (NULL with *n 0 when it has none). */
static remat_token_value *token_values(const remat_graph *g, int32_t *n)
{
    remat_token_value *v;

    *n = g ? remat_graph_token_values(g, NULL, 0) : 0;
    if (*n <= 0)
        return NULL;
    v = calloc((size_t)*n, sizeof *v);
    if (v)
        remat_graph_token_values(g, v, *n);
    return v;
}

bool cli_tokens_wanted(const remat_graph *g)
{
    int32_t n;
    remat_token_value *v = token_values(g, &n);
    bool want = false;

    for (int32_t k = 0; v && k < n; k++)
        want |= v[k].role == REMAT_TOKEN_IDS || v[k].role == REMAT_TOKEN_TARGETS;
    free(v);
    return want;
}

static int64_t value_numel(const remat_graph *g, int32_t value, int64_t *last)
{
    int64_t shape[4], n = 1;
    int nd = remat_graph_value_shape(g, value, shape);

    for (int d = 0; d < nd; d++)
        n *= shape[d];
    *last = nd > 0 ? shape[nd - 1] : 1;
    return n;
}

/* Entry k gets the file's data when its vocabulary holds the file's and its size is the
 * batch's. 0, or 1 after printing why not. */
static int feed_entry(const struct cli_tokens *c, const remat_graph *g,
                      const remat_token_value *v, const char *path)
{
    int64_t last, n = value_numel(g, v->value, &last), fv = remat_tokens_vocab(c->file);
    bool ids = v->role == REMAT_TOKEN_IDS;

    if (n != c->batch * c->seq_len)
        return cli_error("give a model whose ids and targets have one shape", "%s: '%s' "
                         "holds %lld tokens, a batch %lld x %lld", path, v->name,
                         (long long)n, (long long)c->batch, (long long)c->seq_len);
    if (fv > v->vocab)
        return cli_error("a file that is not a token file reads as bytes (vocabulary 256); "
                         "give a model whose vocabulary holds the file's",
                         "%s: the file's vocabulary is %lld but %s '%s' %s %lld", path,
                         (long long)fv, ids ? "the ids" : "the targets", v->name,
                         ids ? "index an embedding of" : "are scored over", (long long)v->vocab);
    return 0;
}

int cli_tokens_open(struct cli_tokens *c, const remat_graph *g, const char *path,
                    uint64_t seed)
{
    int32_t n, first = -1;
    remat_token_value *v = token_values(g, &n);
    remat_status st;
    int rc = 0;

    memset(c, 0, sizeof *c);
    c->seed = seed;
    for (int32_t k = 0; v && k < n && first < 0; k++)
        first = v[k].role == REMAT_TOKEN_IDS ? k : -1;
    for (int32_t k = 0; v && k < n && first < 0; k++)
        first = v[k].role == REMAT_TOKEN_TARGETS ? k : -1;
    if (first < 0) {
        rc = cli_error("give --data a model that reads token ids", "%s: the model reads no "
                       "token ids or targets", path);
        goto out;
    }
    c->batch = value_numel(g, v[first].value, &c->seq_len);
    c->batch /= c->seq_len;
    if ((st = remat_tokens_open(path, &c->file))) {
        rc = cli_error_code(cli_exit_code(st), NULL, "%s", remat_errmsg());
        goto out;
    }
    if (remat_tokens_count(c->file) <= c->seq_len) {
        rc = cli_error("give a longer file or a model with shorter sequences", "%s: %lld "
                       "tokens, too few for sequences of %lld (each takes %lld)", path,
                       (long long)remat_tokens_count(c->file), (long long)c->seq_len,
                       (long long)c->seq_len + 1);
        goto out;
    }
    c->feed = calloc((size_t)n, sizeof *c->feed);
    c->ids = calloc((size_t)(c->batch * c->seq_len), sizeof *c->ids);
    c->targets = calloc((size_t)(c->batch * c->seq_len), sizeof *c->targets);
    if (!c->feed || !c->ids || !c->targets) {
        rc = cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
        goto out;
    }
    for (int32_t k = 0; k < n && !rc; k++) {
        bool ids = k == first && v[k].role == REMAT_TOKEN_IDS;

        if (!ids && v[k].role != REMAT_TOKEN_TARGETS)
            continue;
        if (!(rc = feed_entry(c, g, &v[k], path)))
            c->feed[k] = ids ? c->ids : c->targets;
    }
out:
    free(v);
    return rc;
}

remat_status cli_tokens_step(struct cli_tokens *c, remat_trainer *t, int64_t step,
                             double *loss)
{
    remat_status st = remat_tokens_batch(c->file, c->seed, step, c->batch, c->seq_len,
                                         c->ids, c->targets);

    return st ? st : remat_trainer_step_tokens(t, c->feed, loss);
}

void cli_tokens_fini(struct cli_tokens *c)
{
    remat_tokens_free(c->file);
    free(c->feed);
    free(c->ids);
    free(c->targets);
    memset(c, 0, sizeof *c);
}
