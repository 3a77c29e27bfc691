/*
 * onnx_rnn.h - what the two halves of the RNN reader share: onnx_rnn.c unrolls an LSTM
 * or GRU node over its sequence into gate ops; onnx_rnn_src.c finds where each
 * direction's W, R and B come from (the initializers PyTorch exported, traced back
 * through the Slice, Concat and Unsqueeze nodes that reorder their gates). Internal to
 * the ONNX reader.
 */
#ifndef REMAT_IO_ONNX_RNN_H
#define REMAT_IO_ONNX_RNN_H

#include "io/onnx_read.h"

/* the four parameters of a direction: W, R, and B's halves Wb and Rb */
enum { R_W, R_R, R_WB, R_RB, N_ROLES };

/* where one role's rows come from */
struct rnn_src {
    const Onnx__TensorProto *t; /* the parameter's starting value */
    char name[200];             /* the op that holds it; its parameter is <name>.weight */
    int perm[4];                /* ONNX gate k is rows block perm[k] of t */
};

/* one direction of an LSTM or GRU node being unrolled */
struct rnn {
    bool gru;
    int ng;                     /* gates: 4 (i o f c) or 3 (z r h) */
    int n_dir;                  /* directions in W, R, B: 1, or 2 (bidirectional) */
    int di;                     /* this direction's index in them */
    bool back;                  /* this direction runs from the last step to the first */
    bool lbr;                   /* GRU: linear_before_reset (PyTorch's 1) */
    int64_t T, N, I, H;
    char node[200];             /* the node's name (or its type and index) */
    char base[220];             /* the step ops' names start with it */
    struct rnn_src s[N_ROLES];
    bool bias;                  /* B given */
    int32_t x4;                 /* X as (1, 1, T N, I) */
    int32_t ww, rw;             /* W (G H, I), R (G H, H) */
    int32_t bih, bhh;           /* Wb, Rb as (1, 1, N, G H), -1 without B */
    int32_t rhw, rbh;           /* GRU with linear_before_reset 0: R_h (H, H) and Rb_h
                                   (1, 1, N, H) (-1 without B) */
};

/* Direction q->di's W, R and B into q->s (q->bias set when B is given): each traced to
 * one initializer (PyTorch's, in its gate order) or else taken from the node's input in
 * ONNX's order; a refusal names the node. */
remat_status ox_rnn_sources(struct rd *r, struct rnn *q);

/* Whether the node's activations attribute is absent or the defaults (Sigmoid, Tanh,
 * Tanh; a GRU's first two) for each of n_dir directions. */
bool ox_rnn_default_acts(const struct rd *r, bool gru, int n_dir);

#endif
