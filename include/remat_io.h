/*
 * remat_io.h - the part of libremat's public interface that reads files: image data and
 * token files for training, and ONNX models with their starting weights. Included by
 * remat.h (include that); kept apart so that each header stays one concept.
 */
#ifndef REMAT_IO_H
#define REMAT_IO_H

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ data */

/* A data file of images and labels (docs/formats.md): "REMATDAT", int64 count, C, H, W,
 * then count*C*H*W float32 images (NCHW), then count int32 labels. */
typedef struct remat_data remat_data;

remat_status remat_data_open(const char *path, remat_data **out);
void remat_data_free(remat_data *d);
int64_t remat_data_count(const remat_data *d);
/* The shape of one sample: C, H, W. */
void remat_data_sample_shape(const remat_data *d, int64_t chw[3]);
/* Samples first .. first+n-1 (wrapping around the file) into x and labels. */
void remat_data_batch(const remat_data *d, int64_t first, int64_t n, float *x, int32_t *labels);

/*
 * Token data for a language model (docs/formats.md): a token file ("REMATTOK", version 1,
 * uint16 or int32 tokens below its vocabulary), or any other file read as bytes
 * (plain text: vocabulary 256). Opening reads the whole file and checks it: a malformed
 * one is REMAT_ERR_PARSE with a message naming the file, the fault and its byte offset
 * or token index.
 */
typedef struct remat_tokens remat_tokens;

remat_status remat_tokens_open(const char *path, remat_tokens **out);
void remat_tokens_free(remat_tokens *t);
int64_t remat_tokens_count(const remat_tokens *t);
int64_t remat_tokens_vocab(const remat_tokens *t);
/* Writes n tokens, each in [0, vocab), as a token file (uint16 when vocab <= 65536,
 * else int32); vocab at most 2^31 - 1. */
remat_status remat_tokens_write(const char *path, int64_t vocab, const int32_t *tokens,
                                int64_t n);
/*
 * One batch of batch sequences of seq_len tokens into ids and targets (each
 * batch * seq_len int32, row after row; either may be NULL). Sequence b starts at
 * off = h mod (count - seq_len), h = splitmix64(splitmix64(splitmix64(seed) ^ step) ^ b),
 * redrawn as h = splitmix64(h) while h >= 2^64 - (2^64 mod (count - seq_len)) so that
 * every start is equally likely; ids[b][s] = token[off + s], targets[b][s] =
 * token[off + s + 1]. REMAT_ERR_ARG when the file has fewer than seq_len + 1 tokens.
 */
remat_status remat_tokens_batch(const remat_tokens *t, uint64_t seed, int64_t step,
                                int64_t batch, int64_t seq_len, int32_t *ids,
                                int32_t *targets);

/* What a trainer does with an int32 value of a graph (one made by remat_graph_labels,
 * remat_graph_tokens or remat_graph_positions). */
typedef enum remat_token_role {
    REMAT_TOKEN_LABELS,    /* class labels of a softmax_ce, or read by no op */
    REMAT_TOKEN_IDS,       /* token ids read by an embedding */
    REMAT_TOKEN_TARGETS,   /* a token_ce's targets (negative ones ignored) */
    REMAT_TOKEN_POSITIONS, /* positions: filled by the trainer, never fed */
} remat_token_role;

typedef struct remat_token_value {
    int32_t value;          /* its id in the graph (remat_graph_value_shape) */
    const char *name;       /* as given to the graph; valid while the graph lives */
    remat_token_role role;
    int64_t vocab;          /* what an entry may hold: 0 .. vocab - 1, the smallest
                               reader's bound (an embedding's vocab, the logits' last
                               axis, a softmax_ce's classes; 2 when no op reads it) */
} remat_token_value;

/* The int32 values of g in the order they were added (the entries of
 * remat_trainer_step_tokens): returns their count and describes the first max in out. */
int32_t remat_graph_token_values(const remat_graph *g, remat_token_value *out, int32_t max);

/* ------------------------------------------------------------------ ONNX */

/*
 * A model exported to ONNX (opsets 11 to 17, e.g. torch.onnx.export in training mode):
 * its graph becomes a remat graph, its output the logits of a softmax cross-entropy loss
 * against labels, and its initializers the starting values of the parameters and
 * batch-norm running statistics (docs/onnx.md lists the ops and how each maps).
 */
typedef struct remat_onnx_opts {
    int64_t batch;     /* > 0: replaces the input's first dimension; 0: the file's (a
                          symbolic one reads as 1) */
    bool no_loss;      /* the graph as it is, no loss added (conformance checks); it
                          cannot be trained */
} remat_onnx_opts;

/* The starting values an ONNX file gives, by parameter name. */
typedef struct remat_onnx_weights remat_onnx_weights;

/* Reads the file at path (REMAT_ERR_PARSE for a malformed one, REMAT_ERR_UNSUPPORTED for
 * an op or attribute remat lacks, naming the node, its type and the opset). */
remat_status remat_onnx_read(const char *path, const remat_onnx_opts *o,
                             const remat_allocator *a, remat_graph **graph,
                             remat_onnx_weights **weights);
/* The same from n bytes in memory; label names them in messages. */
remat_status remat_onnx_read_buffer(const void *data, size_t n, const char *label,
                                    const remat_onnx_opts *o, const remat_allocator *a,
                                    remat_graph **graph, remat_onnx_weights **weights);
/* Copies the starting values into a trainer of that graph. */
remat_status remat_onnx_weights_apply(const remat_onnx_weights *w, remat_trainer *t);
void remat_onnx_weights_free(remat_onnx_weights *w);

#ifdef __cplusplus
}
#endif
#endif /* REMAT_IO_H */
