/*
 * remat.h - the public interface of libremat: plan and run neural-network training
 * steps in less memory, by recomputing or moving activations.
 *
 * Example (compiled and run as tests/test_example.c):
 *
 *     #include <remat.h>
 *     #include <stdio.h>
 *
 *     int main(void)
 *     {
 *         remat_zoo_opts zo = { .batch = 32 };      // zeros elsewhere: the model's defaults
 *         remat_graph *g = NULL;
 *         remat_tgraph *tg = NULL;
 *         remat_schedule *s = NULL;
 *         remat_sim_result r;
 *         int rc = 1;
 *
 *         if (remat_zoo_build("resnet50", &zo, NULL, &g) != REMAT_OK ||
 *             remat_tgraph_from_graph(g, NULL, &tg) != REMAT_OK ||
 *             remat_plan_none(tg, &s) != REMAT_OK ||
 *             remat_sim_run(tg, s, &r) != REMAT_OK) {
 *             fprintf(stderr, "remat: %s\n", remat_errmsg());
 *             goto out;
 *         }
 *         printf("activation peak %zu bytes, nothing freed %zu bytes\n",
 *                r.activation_peak_bytes, r.naive_bytes);
 *         rc = 0;
 *     out:
 *         remat_schedule_free(s);
 *         remat_tgraph_free(tg);
 *         remat_graph_free(g);
 *         return rc;
 *     }
 *
 * Conventions: every fallible call returns a remat_status and, on failure, sets a
 * thread-local message (remat_errmsg) that says what and where (the source location
 * too with REMAT_DEBUG=1 in the environment). The library never prints and never
 * exits. Objects are created with *_new / *_build and released with *_free, which
 * accept NULL. Tensors are NCHW float32.
 */
#ifndef REMAT_H
#define REMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_VERSION "0.1.0"

/* ---------------------------------------------------------------- status */

typedef enum remat_status {
    REMAT_OK = 0,
    REMAT_ERR_NOMEM,       /* an allocation failed */
    REMAT_ERR_ARG,         /* a bad argument from the caller */
    REMAT_ERR_SHAPE,       /* shapes do not fit an op */
    REMAT_ERR_PARSE,       /* a malformed input file */
    REMAT_ERR_IO,          /* a file could not be read or written */
    REMAT_ERR_UNSUPPORTED, /* an op, model or feature remat does not have */
    REMAT_ERR_INFEASIBLE,  /* no plan fits the budget */
    REMAT_ERR_INVALID,     /* a schedule breaks its rules */
    REMAT_STATUS_COUNT
} remat_status;

const char *remat_status_name(remat_status s);
/* The message of the last failure on this thread ("" when none). */
const char *remat_errmsg(void);

/* ------------------------------------------------------------- allocator */

/*
 * One function does everything, as in Lua: fn(ud, ptr, old_size, new_size) with
 * new_size == 0 frees ptr and returns NULL; otherwise it returns a block of new_size
 * bytes holding the first min(old_size, new_size) bytes of ptr (ptr may be NULL), or
 * NULL on failure, leaving ptr untouched. NULL as a remat_allocator* means malloc.
 */
typedef struct remat_allocator {
    void *(*fn)(void *ud, void *ptr, size_t old_size, size_t new_size);
    void *ud;
} remat_allocator;

/* ------------------------------------------------------------------- ops */

/* X(ENUM, name): the op list. The internal op table follows this order. */
#define REMAT_OPS(X)                                                                     \
    X(CONV2D, "conv2d")                                                                  \
    X(CONV_TRANSPOSE2D, "conv_transpose2d")                                              \
    X(BATCH_NORM, "batch_norm")                                                          \
    X(RELU, "relu")                                                                      \
    X(MAX_POOL, "max_pool")                                                              \
    X(AVG_POOL, "avg_pool")                                                              \
    X(GLOBAL_AVG_POOL, "global_avg_pool")                                                \
    X(ADD, "add")                                                                        \
    X(CONCAT, "concat")                                                                  \
    X(LINEAR, "linear")                                                                  \
    X(FLATTEN, "flatten")                                                                \
    X(RESHAPE, "reshape")                                                                \
    X(DROPOUT, "dropout")                                                                \
    X(UPSAMPLE_BILINEAR, "upsample_bilinear")                                            \
    X(CROP, "crop")                                                                      \
    X(PAD, "pad")                                                                        \
    X(SOFTMAX_CE, "softmax_ce")                                                          \
    X(SUM_LOSSES, "sum_losses")                                                          \
    X(CLIP, "clip")                                                                      \
    X(LEAKY_RELU, "leaky_relu")                                                          \
    X(SIGMOID, "sigmoid")                                                                \
    X(MUL, "mul")                                                                        \
    X(SOFTMAX, "softmax")                                                                \
    X(TRANSPOSE, "transpose")                                                            \
    X(LAYER_NORM, "layer_norm")                                                          \
    X(GELU, "gelu")                                                                      \
    X(MATMUL, "matmul")                                                                  \
    X(SOFTMAX_LAST, "softmax_last")                                                      \
    X(EMBEDDING, "embedding")                                                            \
    X(TOKEN_CE, "token_ce")                                                              \
    X(TANH, "tanh")                                                                      \
    X(HARD_SIGMOID, "hard_sigmoid")                                                      \
    X(HARD_SWISH, "hard_swish")                                                          \
    X(REDUCE_SUM, "reduce_sum")

typedef enum remat_op {
#define REMAT_X_ENUM(e, s) REMAT_OP_##e,
    REMAT_OPS(REMAT_X_ENUM)
#undef REMAT_X_ENUM
    REMAT_OP_COUNT
} remat_op;

const char *remat_op_name(remat_op op);

/*
 * Op attributes. Zero means "the default" for every field, so a zero-initialised
 * struct with the few fields an op needs is the normal way to fill it:
 *   conv2d / conv_transpose2d: out_channels, kernel (kh, kw), stride (1), pad,
 *       dilation (1), groups (1), output_pad (transposed only), bias;
 *   batch_norm: eps (1e-5), momentum (0.1);
 *   max_pool / avg_pool: kernel, stride (= kernel), pad, ceil_mode,
 *       count_include_pad (avg_pool only);
 *   linear: out_channels (output features), bias;
 *   reshape: ndim, shape (one entry may be -1);
 *   dropout: p (0.5);
 *   upsample_bilinear: out_h, out_w, align_corners;
 *   crop: out_h, out_w, and offset (top, left); offset -1 means centred;
 *   pad: pad_t, pad_b, pad_l, pad_r (zeros);
 *   softmax_ce: inputs (logits (N, K), labels (N)), output the mean loss, shape (1);
 *   sum_losses: any number of losses of shape (1), summed;
 *   layer_norm: eps (1e-5); normalizes each row over the last axis of a 2-d to 4-d
 *       input, such as (N, D) or (N, S, D), with parameters weight (gamma, starts at 1)
 *       and bias (beta, starts at 0) of shape (D), as PyTorch's nn.LayerNorm(D);
 *   gelu: approximate (false: the exact x * Phi(x) with the normal CDF Phi; true: the
 *       tanh form, as PyTorch's GELU(approximate='tanh'));
 *   matmul: trans_a, trans_b; inputs A (..., M, K) and B (..., K, N) of 2 to 4
 *       dimensions with equal leading (batch) axes, or B 2-d (K, N) shared by every
 *       batch; output (..., M, N), each batch's A B (A^T, B^T where asked: torch.matmul
 *       on a.transpose(-2, -1) and the like); B may be another op's 2-d parameter
 *       (remat_graph_param: tied weights, such as a language model's output layer
 *       reading its input embedding's table), whose gradient then gets both ops' sums;
 *   softmax_last: causal, scale; softmax over the last axis of a 2-d to 4-d input of
 *       scale times the input (attention's scaled scores (..., S_q, S_k); scale 0 means
 *       1); with causal, row i of each matrix (the last two axes)
 *       takes columns j <= i only, the others get 0 (PyTorch: masked_fill of the upper
 *       triangle with -inf, then softmax);
 *   embedding: vocab, out_channels (the width D); input token ids (remat_graph_tokens)
 *       of shape S, output S + (D): row id of the parameter table (vocab, D) per token
 *       (PyTorch's nn.Embedding; its table starts with variance 1, uniform here);
 *   token_ce: inputs (logits (..., V) of 2 or 3 dimensions, targets: token ids of the
 *       logits' leading shape, remat_graph_tokens), output the mean over the targets
 *       that are not negative of -log softmax(logits)[target], shape (1); a negative
 *       target is ignored (PyTorch's cross_entropy with ignore_index), 0 when none
 *       counts;
 *   hard_sigmoid: alpha, beta (alpha 0 means 1/6 and 1/2: PyTorch's Hardsigmoid):
 *       min(1, max(0, alpha x + beta)), as ONNX's HardSigmoid;
 *   hard_swish: x hard_sigmoid(x) with 1/6 and 1/2 (PyTorch's Hardswish);
 *   reduce_sum: ndim, shape: the output's shape, the input's rank (1 to 4) with 1 on
 *       each axis summed over; scale multiplies the sums (0 means 1; 1/count: a mean).
 */
typedef struct remat_attrs {
    int64_t out_channels;
    int32_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int32_t out_pad_h, out_pad_w;
    bool bias, ceil_mode, count_include_pad, align_corners;
    bool approximate;           /* gelu: the tanh approximation instead of erf */
    bool trans_a, trans_b;      /* matmul: the last two axes of A (of B) transposed */
    bool causal;                /* softmax_last: row i of each matrix sees columns <= i */
    float scale;                /* softmax_last: multiplies the input first; 0 means 1 */
    int64_t vocab;              /* embedding: rows of its table (token ids 0 .. vocab - 1) */
    float eps, momentum, p;
    float clip_min, clip_max;   /* clip: both 0 means [0, 6] (ReLU6) */
    float alpha;                /* leaky_relu's negative slope; 0 means 0.01 */
    float beta;                 /* hard_sigmoid's offset (alpha its slope) */
    int32_t perm[4];            /* transpose: output dim i is input dim perm[i]; all 0
                                   means reversed (ONNX's default) */
    int64_t out_h, out_w;
    int32_t offset_h, offset_w; /* crop: -1 centred */
    int32_t pad_t, pad_b, pad_l, pad_r;
    int32_t ndim;
    int64_t shape[4];
} remat_attrs;

/* ---------------------------------------------------------- forward graph */

typedef struct remat_graph remat_graph;

remat_status remat_graph_new(const remat_allocator *a, remat_graph **out);
void remat_graph_free(remat_graph *g);

/*
 * Building. Each call returns the id of the new value, or -1 after a failure. Failures
 * are sticky: once a call fails, later calls return -1 and remat_graph_status() reports
 * the first failure, so a builder may check once at the end.
 */
int32_t remat_graph_input(remat_graph *g, const char *name, int ndim, const int64_t *shape);
int32_t remat_graph_labels(remat_graph *g, const char *name, int64_t n);
/* Integer token ids (int32) of 1 to 3 dimensions: an embedding's input or a token_ce's
 * targets. A trainer draws them from its seed in [0, vocab) (the labels argument of a
 * step feeds a softmax_ce's class labels only). */
int32_t remat_graph_tokens(remat_graph *g, const char *name, int ndim, const int64_t *shape);
/* Token positions: int32 values like tokens, holding 0, 1, .., n-1 along the last axis
 * (n its size) in every row; a trainer fills them itself (a position embedding's ids). */
int32_t remat_graph_positions(remat_graph *g, const char *name, int ndim,
                              const int64_t *shape);
int32_t remat_graph_add(remat_graph *g, remat_op op, const int32_t *inputs, int n_inputs,
                        const remat_attrs *attrs, const char *name);
/* The k-th parameter (0: weight or gamma or table, 1: bias or beta) of the op that
 * produced value, as a value id that a matmul may read as its B (tied weights); -1 when
 * that op has no such parameter. */
int32_t remat_graph_param(const remat_graph *g, int32_t value, int k);
/* Mark the value to minimise (shape (1)). */
remat_status remat_graph_set_loss(remat_graph *g, int32_t value);
remat_status remat_graph_status(const remat_graph *g);

int32_t remat_graph_n_ops(const remat_graph *g);
int32_t remat_graph_n_values(const remat_graph *g);
int32_t remat_graph_n_inputs(const remat_graph *g);   /* data inputs (labels apart) */
int64_t remat_graph_n_params(const remat_graph *g);   /* trainable scalars */
double remat_graph_forward_flops(const remat_graph *g); /* whole batch */
/* Shape of a value: returns its ndim and fills shape[0..ndim). -1 on a bad id. */
int remat_graph_value_shape(const remat_graph *g, int32_t value, int64_t shape[4]);

/* -------------------------------------------------------------- model zoo */

typedef struct remat_zoo_opts {
    int64_t batch;          /* 0: 1 */
    int64_t height, width;  /* 0: the model's usual input size */
    int64_t classes;        /* 0: the model's usual number of classes */
    int aux;                /* GoogLeNet auxiliary classifiers: 0 default (on), 1 on, -1 off */
    int64_t base_channels;  /* U-Net's first-level channels (0: 64; each level doubles) */
    /* Transformers (gpt2, bert-base; 0: the model's default): blocks, attention heads,
     * hidden width (a multiple of heads), tokens per sequence (at most the model's
     * positions: 1024 for gpt2, 512 for bert-base), vocabulary. batch is sequences. */
    int64_t layers, heads, hidden, seq_len, vocab;
    float dropout;          /* transformers' dropout probability; 0: the model's default
                               (0.1); negative: no dropout ops */
} remat_zoo_opts;

size_t remat_zoo_count(void);
const char *remat_zoo_name(size_t i);        /* NULL past the end */
const char *remat_zoo_describe(size_t i);
/* Builds a zoo model by name: the names listed above, plus resnetD for any depth D with
 * (D - 2) % 3 == 0 and D >= 47 (n = (D - 2) / 3 bottleneck blocks as (3, 8, n - 14, 3);
 * 50, 101, 152 and 2498 keep their published layouts), and resnet-a-b-c-d for explicit
 * bottleneck block counts per stage. */
remat_status remat_zoo_build(const char *name, const remat_zoo_opts *o,
                             const remat_allocator *a, remat_graph **out);

/* --------------------------------------------------------- training graph */

typedef struct remat_tgraph remat_tgraph;

/* T_v. DEFAULT is FLOPs for graphs and KUSUMOTO for dumps (which have no shapes). */
typedef enum remat_cost {
    REMAT_COST_DEFAULT = 0,
    REMAT_COST_FLOPS,     /* the forward FLOPs of the op that produces v */
    REMAT_COST_KUSUMOTO,  /* 10 for convolutions, 1 otherwise (Kusumoto et al.) */
} remat_cost;

/* The optimizer a trainer updates the parameters with; the state it keeps per parameter
 * is resident (SGD: the momentum; AdamW: the first and second moments). */
typedef enum remat_optimizer {
    REMAT_OPTIMIZER_SGD = 0, /* torch.optim.SGD with momentum and weight decay */
    REMAT_OPTIMIZER_ADAMW,   /* torch.optim.AdamW: decoupled decay, bias correction */
    REMAT_OPTIMIZER_COUNT
} remat_optimizer;

typedef struct remat_tgraph_opts {
    remat_cost cost;
    remat_optimizer optimizer; /* its state counts in the resident bytes */
    size_t align;        /* M_v rounding; 0: 64 bytes for graphs, 1 for dumps */
    /* Data parallel and micro-batches (docs/distributed.md): what one process keeps
     * resident. accumulate > 1 adds the sum of its micro-batches' gradients (one copy of
     * the parameters); ranks > 1 pads the parameters to ranks equal shards and adds the
     * reduction's buffers; shard_optimizer keeps 1/ranks of the optimizer's state. 0: 1.
     * bucket_bytes: the most gradient bytes the reduction moves as one bucket (its
     * receive buffers hold two buckets' pieces; 0: 25 MiB, PyTorch DDP's default). */
    int32_t accumulate, ranks;
    bool shard_optimizer;
    size_t bucket_bytes;
} remat_tgraph_opts;

/* Autodiff: the forward graph plus backward ops, gradients and costs. */
remat_status remat_tgraph_from_graph(const remat_graph *g, const remat_tgraph_opts *o,
                                     remat_tgraph **out);
/* Reads a Chainer graph dump of Kusumoto et al. (cg_*.txt, format in docs/formats.md).
 * REMAT_COST_FLOPS is refused: a dump has no shapes. */
remat_status remat_tgraph_read_dump(const char *path, const remat_tgraph_opts *o,
                                    const remat_allocator *a, remat_tgraph **out);
void remat_tgraph_free(remat_tgraph *tg);

int32_t remat_tgraph_n_values(const remat_tgraph *tg);   /* every value, params included */
int32_t remat_tgraph_n_planned(const remat_tgraph *tg);  /* |V|: values the plan controls */
int32_t remat_tgraph_n_ops(const remat_tgraph *tg);
int64_t remat_tgraph_n_params(const remat_tgraph *tg);
size_t remat_tgraph_resident_bytes(const remat_tgraph *tg);
double remat_tgraph_forward_flops(const remat_tgraph *tg);
/* True when the forward op order is the file's record order, which in the dumps is not
 * a topological order (see docs/formats.md). */
bool remat_tgraph_is_file_order(const remat_tgraph *tg);

/* -------------------------------------------------------------- schedules */

typedef enum remat_step_kind {
    REMAT_STEP_FWD = 0, REMAT_STEP_BWD, REMAT_STEP_FREE,
    REMAT_STEP_OFFLOAD, REMAT_STEP_PREFETCH, REMAT_STEP_WAIT,
    REMAT_STEP_COUNT
} remat_step_kind;

typedef struct remat_step {
    remat_step_kind kind;
    int32_t id;          /* op id for FWD/BWD, buffer id for the others */
} remat_step;

typedef struct remat_schedule remat_schedule;
typedef struct remat_algos remat_algos; /* a backend's kernels: remat_train_algos */

/* The `none` strategy: forward in op order, backward in reverse, each buffer freed
 * right after its last use. */
remat_status remat_plan_none(const remat_tgraph *tg, remat_schedule **out);

/* X(ENUM, name): the planning strategies. */
#define REMAT_STRATEGIES(X)                                                              \
    X(NONE, "none")                                                                      \
    X(APPROX_TC, "approx-tc")                                                            \
    X(APPROX_MC, "approx-mc")                                                            \
    X(EXACT_TC, "exact-tc")                                                              \
    X(EXACT_MC, "exact-mc")                                                              \
    X(CHEN_SQRTN, "chen-sqrtn")                                                          \
    X(CHEN_GREEDY, "chen-greedy")                                                        \
    X(SUPERNEURONS, "superneurons")                                                      \
    X(OPTIMAL, "optimal")                                                                \
    X(HYBRID, "hybrid")                                                                  \
    X(BLOCKS, "blocks")                                                                  \
    X(SELECTIVE, "selective")

typedef enum remat_strategy {
#define REMAT_X_ENUM(e, s) REMAT_STRATEGY_##e,
    REMAT_STRATEGIES(REMAT_X_ENUM)
#undef REMAT_X_ENUM
    REMAT_STRATEGY_COUNT
} remat_strategy;

const char *remat_strategy_name(remat_strategy s);
/* REMAT_STRATEGY_COUNT when the name is unknown. */
remat_strategy remat_strategy_from_name(const char *name);

typedef struct remat_plan_opts {
    remat_strategy strategy;
    size_t budget_bytes;     /* total bytes, resident included; 0: no limit */
    bool budget_min;         /* find the smallest budget the strategy meets: the least
                                packed total (arena + resident) of its plans */
    bool least_peak;         /* with budget_min: the strategy's least activation peak
                                instead, however it packs (the planner's own reach, as
                                against the lower limit) */
    double time_limit;       /* seconds for `optimal`; 0: 60 */
    int64_t max_lower_sets;  /* exact DP's cap; 0: 100,000 (about two minutes) */
    const remat_algos *algos; /* the backend's kernels (remat_train_algos): the plan
                                chooses each op's algorithm and counts its scratch in
                                the peak; NULL: kernels without scratch (ref) */
    const char *conv_algo;   /* with algos: NULL or "fit": for each op and pass the
                                fastest algorithm whose scratch fits; a backend's name
                                ("gemm"): that one wherever the op has it */
    bool authors_lattice;    /* exact DP: only the chains the authors' solver can reach
                                (their depth-first numbering of the lower sets, see
                                docs/planners.md); reproduces their figures */
    bool authors_bound;      /* the DPs: the authors' peak bound of a block (2 M(Vi) +
                                the boundary terms) instead of the simulator's model */
    int64_t coarse_pairs;    /* approx-tc/-mc: past this many pairs of lower sets within
                                the budget's window, blocks longer than a few runs of the
                                family join coarse sets only (where the graph narrows;
                                docs/planners.md); 0: where the window is wide on a large
                                family (past 2^22 pairs time-centric, 2^24 memory-centric,
                                and 8 times the restricted ones); -1: never, every pair
                                (the flat DP) */
    double dp_within;        /* approx-tc/exact-tc: a chain whose recomputation is proven
                                within this fraction of the least over the DP's family
                                is taken where a beam run finds one (after the
                                Lagrangian bound, before the exact search); 0: 1e-3 on
                                graphs past 1,000 planned values, the optimum below;
                                negative: always the optimum */
    double bandwidth;        /* host-tier copy bandwidth, bytes/s (offload plans);
                                0: REMAT_DEFAULT_BANDWIDTH */
    double flops;            /* compute rate, FLOP/s, for the same time model;
                                0: REMAT_DEFAULT_FLOPS */
    bool no_offload;         /* superneurons and hybrid: never offload */
    double copy_slowdown;    /* the share of the compute rate a copy under way takes
                                from the kernels (a copy thread on the cpu backend's
                                cores: 1/threads); 0: copies on their own engine */
    bool host_in_budget;     /* the host tier is the same memory as the arena (cpu or
                                ref backend without a host file): its packed size counts
                                in the budget */
    bool whole_pages;        /* the arena, the resident block and the host tier are
                                blocks of whole pages of host memory (cpu or ref
                                backend: what the operating system holds once they are
                                touched): each counts in the total rounded up to the
                                page; false: in bytes */
    bool reproducible;       /* with algos: each op's algorithm fixed whatever the budget
                                (the fastest it has), so that every plan of a model
                                trains to the same bits; its scratch is kept free */
    /* Called now and then from the planning thread while a long stage runs (the DP's
     * passes over the lower sets): the stage's name and how far it is, in [0, 1].
     * NULL: nothing is reported. */
    void (*progress)(void *ud, const char *stage, double done);
    void *progress_ud;
} remat_plan_opts;

/* The time model's defaults: a PCIe 3.0 x16 link and a GPU of the SuperNeurons era. */
#define REMAT_DEFAULT_BANDWIDTH 12e9
#define REMAT_DEFAULT_FLOPS 10e12

typedef struct remat_plan_info {
    size_t budget_bytes;            /* the total given, or the minimum found */
    size_t activation_budget_bytes; /* B: the budget minus the resident bytes */
    size_t dp_bound_bytes;          /* the planner's own bound on the peak (0 if none) */
    double plan_seconds;
    int64_t n_lower_sets;           /* lower sets the DP considered (0 for others) */
    int64_t n_dp_sets;              /* of them, those its chain was chosen over: fewer
                                       where a large graph's time-centric plan searched
                                       in two stages (docs/planners.md) */
    int32_t n_blocks;               /* blocks of the chain (0 when not a chain) */
    double overhead_bound;          /* the planner's own overhead (recomputed / forward) */
    bool feasible;
    double optimality_gap;          /* `optimal`: relative MILP gap (0 when proven) */
    int32_t n_offloaded;            /* values sent to the host tier and back */
    size_t offloaded_bytes;         /* their bytes */
    size_t scratch_reserve_bytes;   /* kept free for the kernels' scratch while planning:
                                       the largest least scratch of an op (with algos) */
    int32_t n_algo_choices;         /* ops' passes with more than one algorithm */
    int32_t n_algo_fastest;         /* of them, those given their fastest */
    size_t arena_bytes;             /* the packed arena: activations, gradients and the
                                       kernels' scratch at their offsets, fragmentation
                                       included (>= the activation peak) */
    size_t host_arena_bytes;        /* the packed host tier (0 without offloads) */
    size_t total_bytes;             /* what training allocates: arena + resident (+ the
                                       host tier when host_in_budget), each in whole pages
                                       with whole_pages; <= budget_bytes */
    int32_t n_moves;                /* live buffers moved inside the arena per step to
                                       hold it within the budget (0: the packed offsets
                                       fit as they are) */
    size_t moved_bytes;             /* their bytes, copied once per step */
    double dp_within;               /* time-centric DPs: 0 when the chain is the least
                                       over the family; else the fraction of it that
                                       its recomputation is proven within (dp_within) */
    bool kept_all;                  /* the DPs: the plan is `none`'s (nothing
                                       recomputed), which fits the budget and the
                                       simulator finds better than the DP's chain
                                       (n_blocks 0) */
} remat_plan_info;

/*
 * Plans a training step under the budget. REMAT_ERR_INFEASIBLE when no plan of the
 * strategy fits (the message gives the smallest feasible budget when it can be found).
 * info may be NULL. Some independent searches (hybrid's DP chains, the DP's least
 * budget) run on up to 8 threads, the caller's among them, when the graph's allocator is
 * the C library's; with an allocator of the caller's (which need not be thread-safe)
 * everything runs on the calling thread. The plan is the same either way.
 */
remat_status remat_plan(const remat_tgraph *tg, const remat_plan_opts *o, remat_schedule **out,
                        remat_plan_info *info);
void remat_schedule_free(remat_schedule *s);
size_t remat_schedule_n_steps(const remat_schedule *s);
const remat_step *remat_schedule_steps(const remat_schedule *s);
/* The algorithm the plan chose for step i (an id of the backend's, see remat_algos_name;
 * -1 when the plan chose none: no algos, or not a FWD or BWD) and the scratch it takes
 * during the step (scratch may be NULL). */
int32_t remat_schedule_step_algo(const remat_schedule *s, size_t i, size_t *scratch);
/* Buffers: ids [0, n_values) hold forward values, [n_values, 2 n_values) gradients. */
const char *remat_buffer_name(const remat_tgraph *tg, int32_t buf, char *tmp, size_t n);

/* -------------------------------------------------------------- simulator */

typedef struct remat_sim_result {
    size_t activation_peak_bytes; /* max live plan-controlled bytes after a step, with
                                     the step's scratch */
    size_t naive_bytes;           /* every forward value and gradient held at once */
    size_t naive_all_bytes;       /* twice every value, inputs and parameters too */
    size_t resident_bytes;        /* params, their grads and the optimizer's state (SGD's
                                     momentum, AdamW's two moments), inputs, labels, BN
                                     stats */
    size_t lower_bound_bytes;     /* the largest single step's own need (its scratch
                                     included) */
    size_t scratch_peak_bytes;    /* the most scratch one step takes (counted in the
                                     activation peak during its step) */
    double overhead;              /* recomputed cost / forward cost */
    size_t n_steps;
    size_t peak_step;             /* index of the step at the peak */
    /* The host tier and the time model (ops take their FLOPs at the compute rate,
     * slowed by copy_slowdown while a copy is under way; copies take their bytes at the
     * bandwidth on one copy engine, in issue order; a WAIT stalls compute until its
     * copy is done). */
    size_t host_peak_bytes;       /* most bytes held on the host tier at once */
    size_t transfer_bytes;        /* bytes copied out and back */
    double compute_seconds;       /* every FWD and BWD, recomputations included */
    double transfer_seconds;      /* the copy engine's busy time */
    double stall_seconds;         /* compute waiting on copies */
    double total_seconds;         /* compute + stalls */
} remat_sim_result;

typedef struct remat_sim_opts {
    double bandwidth;             /* bytes/s; 0: REMAT_DEFAULT_BANDWIDTH */
    double flops;                 /* FLOP/s; 0: REMAT_DEFAULT_FLOPS */
    double copy_slowdown;         /* as remat_plan_opts.copy_slowdown */
} remat_sim_opts;

/* Checks the schedule's validity (REMAT_ERR_INVALID with the step and reason) and
 * measures it (the time model at the defaults). */
remat_status remat_sim_run(const remat_tgraph *tg, const remat_schedule *s,
                           remat_sim_result *res);
/* The same with the time model's rates (o may be NULL). */
remat_status remat_sim_run_opts(const remat_tgraph *tg, const remat_schedule *s,
                                const remat_sim_opts *o, remat_sim_result *res);
/* Live plan-controlled bytes after each step (before later frees): n_steps entries. */
remat_status remat_sim_timeline(const remat_tgraph *tg, const remat_schedule *s,
                                size_t *live, size_t n);

/* --------------------------------------------------------------- training */

typedef enum remat_backend_kind {
    REMAT_BACKEND_REF = 0, /* plain C loops: the specification */
    REMAT_BACKEND_CPU,     /* oneDNN */
    REMAT_BACKEND_CUDA,
    REMAT_BACKEND_COUNT
} remat_backend_kind;

const char *remat_backend_name(remat_backend_kind b);

typedef struct remat_train_opts {
    remat_backend_kind backend;
    int threads;            /* cpu backend threads; 0: all cores */
    uint64_t seed;          /* parameters, synthetic data and dropout masks */
    float lr, momentum, weight_decay; /* SGD, as torch.optim.SGD */
    remat_optimizer optimizer; /* must be the training graph's (remat_tgraph_opts) */
    float beta1, beta2, eps;   /* AdamW (torch.optim.AdamW); 0: 0.9, 0.999, 1e-8 */
    const char *host_file;  /* the host tier (offloaded values) in this file, mapped;
                               NULL: in memory */
    /* Micro-batches and data parallel (docs/distributed.md); each must be the training
     * graph's (remat_tgraph_opts), whose resident bytes count what it keeps. */
    int32_t accumulate;     /* micro-batches per step in this process (0: 1) */
    bool shard_optimizer;   /* with comm: this rank keeps and updates 1/size of the state */
    const struct remat_comm *comm; /* the ranks training together; NULL: this one alone */
    bool reduce_after;      /* with comm: start the reduction after the backward pass
                               instead of bucket by bucket during it (the same bits) */
} remat_train_opts;

/* The defaults: ref backend, seed 1, lr 0.01, momentum 0.9, weight decay 1e-4. */
remat_train_opts remat_train_opts_default(void);

/*
 * Processes training one model together, data parallel (docs/distributed.md): this
 * one's rank among size, and collective calls that move bytes and do no arithmetic, so
 * that the trainer sums gradients in an order of its own (rank order) that timing cannot
 * change. ud is passed to each. exchange and gather start a transfer and return at once
 * (*req names it until test reports it finished; until then its buffers are the
 * transfer's); every rank starts its exchanges in one order and its gathers in one
 * order, though the two may interleave differently on different ranks. The count and
 * displacement arrays are read during the call only.
 */
typedef struct remat_comm {
    int32_t rank, size;
    void *ud;
    /* All to all: counts[j] floats at send + sdispl[j] go to rank j, and rank i's piece
     * for this rank, rcounts[i] floats, lands at recv + rdispl[i] (0: nothing). */
    remat_status (*exchange)(void *ud, const float *send, const size_t *counts,
                             const size_t *sdispl, float *recv, const size_t *rcounts,
                             const size_t *rdispl, int32_t *req);
    /* All gather in place: rank i's piece is counts[i] floats at data + displ[i]. */
    remat_status (*gather)(void *ud, float *data, const size_t *counts, const size_t *displ,
                           int32_t *req);
    /* *done: whether transfer req has finished (wait: blocks until it has); a finished
     * req's buffers are the caller's again and its name may be given to another. */
    remat_status (*test)(void *ud, int32_t req, bool wait, bool *done);
    /* Every rank's st (blocking): *failed receives the lowest rank whose st is not
     * REMAT_OK (-1: none) and *failed_st that rank's st. */
    remat_status (*agree)(void *ud, remat_status st, int32_t *failed,
                          remat_status *failed_st);
} remat_comm;

/*
 * The time model's rates for a backend on this machine with o's threads: *flops the
 * compute rate its kernels reach on convolutions and matrix products, *bandwidth the
 * rate of one host-tier copy, *copy_slowdown the share of the compute rate that a copy
 * under way takes from the kernels (a copy thread on the same cores; 0 on a device with
 * its own copy engine). Measured once (about a second) and cached in
 * $XDG_CACHE_HOME/remat (or ~/.cache/remat) per backend, thread count and machine;
 * REMAT_CALIBRATE=0 in the environment skips measuring and gives the defaults;
 * REMAT_CALIBRATE=again measures anew and rewrites the cache (measure on an idle
 * machine: the figures of a loaded one are kept until then).
 */
remat_status remat_calibrate(const remat_train_opts *o, double *flops, double *bandwidth,
                             double *copy_slowdown);

typedef struct remat_trainer remat_trainer;

/*
 * A trainer runs the schedule s of the training graph tg (made from g by autodiff) on
 * a backend: one arena sized by the layout of s, parameters initialised from the seed
 * (PyTorch's default initialisation: uniform ±1/sqrt(fan_in) for convolution and linear
 * weights and biases, batch-norm gamma 1 and beta 0). g, tg and s must outlive it.
 */
remat_status remat_trainer_new(const remat_graph *g, const remat_tgraph *tg,
                               const remat_schedule *s, const remat_train_opts *o,
                               remat_trainer **out);
void remat_trainer_free(remat_trainer *t);
/*
 * A backend made once: o->backend with o's threads, its context (thread pool, kernel
 * caches, copy thread) shared by the table of its kernels (remat_backend_algos) and the
 * trainer that then runs on it (remat_trainer_on), so that the kernels the plan counted
 * are the ones prepared for the steps. One trainer at a time; it must outlive them.
 * remat_train_algos and remat_trainer_new make and free one of their own.
 */
typedef struct remat_backend remat_backend;
remat_status remat_backend_new(const remat_train_opts *o, remat_backend **out);
void remat_backend_free(remat_backend *b);
remat_status remat_backend_algos(remat_backend *b, const remat_graph *g,
                                 const remat_tgraph *tg, remat_algos **out);
/* remat_trainer_new on b (o->backend must be b's kind; b's threads are used). */
remat_status remat_trainer_on(remat_backend *b, const remat_graph *g, const remat_tgraph *tg,
                              const remat_schedule *s, const remat_train_opts *o,
                              remat_trainer **out);
/*
 * The backend's kernels for this graph: for every op's forward and backward, the
 * algorithms the backend can run it with, fastest first, and the scratch each takes
 * during its step (found by preparing every op without running it). Pass it as
 * remat_plan_opts.algos: the plan chooses per op and pass the fastest algorithm whose
 * scratch fits what the schedule leaves free at every step that runs it (one choice per
 * op and pass, so that a recomputation gives the first forward's bits), and counts it.
 * A trainer runs a schedule planned with another backend's table: REMAT_ERR_ARG.
 */
remat_status remat_train_algos(const remat_graph *g, const remat_tgraph *tg,
                               const remat_train_opts *o, remat_algos **out);
void remat_algos_free(remat_algos *a);
/* The backend's name for algorithm id ("gemm", "direct", "winograd"; "reference"). */
const char *remat_algos_name(const remat_algos *a, int32_t id);
/* The choices for op's forward or backward, fastest first: their count, and at most max
 * of them in ids and scratch (either may be NULL). */
int32_t remat_algos_choices(const remat_algos *a, int32_t op, bool backward, int32_t *ids,
                            size_t *scratch, int32_t max);

/*
 * One training step: forward, recomputation and backward as scheduled, then an SGD
 * update. inputs: one array per input value of the graph, in the order they were
 * added; labels: int32 class indices; NULL for either means synthetic data drawn from
 * (seed, step). *loss receives the step's loss before the update. The step allocates
 * nothing.
 */
remat_status remat_trainer_step(remat_trainer *t, const float *const *inputs,
                                const int32_t *labels, double *loss);
/*
 * With accumulate K or a comm of N ranks a step takes K calls of remat_trainer_step (or
 * _step_tokens) on each rank, one micro-batch each (*loss: its own loss); the K-th sums
 * the gradients, divides by M = N * K and updates. Micro-batch k of rank r is number
 * m = step * M + r * K + k of the run: synthetic data and dropout masks are drawn from
 * m (step itself when M is 1). The order (docs/distributed.md): g = (((g_0 + g_1) + g_2)
 * + ... + g_{M-1}) / M in float, g_m from zeroed gradients, so N ranks at K = 1 give the
 * bits of one process with accumulate N. On N ranks the K-th call's backward pass
 * starts reducing each bucket of gradients once they are final (unless reduce_after).
 * Every call agrees with the other ranks: a failure on any rank fails that call on
 * every rank, naming the rank, and abandons the step. remat_trainer_micro: the number m
 * of the next call's micro-batch.
 */
int64_t remat_trainer_micro(const remat_trainer *t);
/* The same step without the update (gradients are left in place). */
remat_status remat_trainer_gradients(remat_trainer *t, const float *const *inputs,
                                     const int32_t *labels, double *loss);
/*
 * A training step fed token data: tokens has one entry per int32 value of the graph
 * (labels, tokens and positions values, in the order they were added: the list of
 * remat_graph_token_values), each an array of that value's element count, or NULL for
 * data drawn from (seed, step) as remat_trainer_step draws it. Positions entries are
 * ignored: the trainer fills positions with 0 .. n-1 along their last axis in every step.
 * Float inputs are drawn. An entry outside its value's vocabulary (a negative target of
 * a token_ce apart) is refused before the step with REMAT_ERR_ARG, naming the value, the
 * index and the op that reads it; the trainer is then unchanged.
 */
remat_status remat_trainer_step_tokens(remat_trainer *t, const int32_t *const *tokens,
                                       double *loss);
/* The same step without the update, as remat_trainer_gradients is to remat_trainer_step:
 * the gradients are left in place (remat_trainer_param), the parameters and the step
 * count unchanged. */
remat_status remat_trainer_gradients_tokens(remat_trainer *t, const int32_t *const *tokens,
                                            double *loss);

typedef struct remat_train_stats {
    size_t planned_peak_bytes;   /* the simulator's activation peak of the schedule (the
                                    steps' scratch included) */
    size_t measured_peak_bytes;  /* the most arena bytes held at once while running (the
                                    steps' scratch included) plus any scratch the backend
                                    holds of its own */
    size_t workspace_bytes;      /* the most scratch one step takes (oneDNN's scratchpads,
                                    blocked copies and gradient staging; 0 on ref) */
    size_t arena_bytes;          /* the arena's size (>= the peak: fragmentation) */
    size_t resident_bytes;
    int64_t steps;
    size_t planned_host_bytes;   /* the simulator's host-tier peak */
    size_t measured_host_bytes;  /* the most host-tier bytes held at once while running */
    size_t host_bytes;           /* the host tier's size */
    size_t transfer_bytes;       /* bytes copied out and back, all steps */
    double copy_seconds;         /* time the copies took, all steps */
    double wait_seconds;         /* time WAIT steps blocked, all steps */
    size_t moved_bytes;          /* bytes moved inside the arena (the layout's moves),
                                    all steps */
    double move_seconds;         /* the time those moves took, all steps */
    /* With a comm (docs/distributed.md): the time each step's reduction across ranks kept
     * the trainer waiting after the ranks agreed the backward pass was done, all steps,
     * and the buckets it moves per step. */
    double reduce_wait_seconds;
    int32_t reduce_buckets;
    /* The operating system's view (Linux /proc/self; 0 where unavailable), from the
     * trainer's mark, taken when its tables were built and before its blocks (arena,
     * resident block, host tier) were allocated: the process's resident set then, and the
     * most it held since (its high-water mark, reset at the mark: the kernel's counters,
     * which may lag by a few hundred KiB); and, exactly from the page tables, how much
     * the resident set grew since then in code and constants (the program's and its
     * libraries' pages run for the first time and kernels compiled on first use: not
     * memory anyone allocated) and in data (every other page: what the budget bounds),
     * the data part plus anything the high-water mark saw come and go. */
    size_t os_rss_before_bytes;
    size_t os_rss_peak_bytes;
    size_t os_rss_code_growth_bytes;
    size_t os_rss_data_growth_bytes;
    /* The data the trainer's tables took before the mark (its maps of values, buffers and
     * steps, the arena's layout, the kernels' descriptors): the compiled plan, which,
     * like the schedule itself, the budget does not count (tens of KB). */
    size_t os_rss_tables_bytes;
    /* The resident pages of the blocks in host memory when the stats are read (mincore):
     * the arena and resident block (not on cuda) and the host tier; once every page has
     * been touched, the plan's total (whole pages). The data's growth less this is what
     * came during the steps beside the blocks. */
    size_t os_rss_blocks_bytes;
} remat_train_stats;

void remat_trainer_stats(const remat_trainer *t, remat_train_stats *st);
/* FNV-1a 64 of every parameter's bytes, in graph order. */
uint64_t remat_trainer_param_checksum(const remat_trainer *t);
/*
 * A function called after the first forward of every op in a step (recomputations
 * excluded), with the op's id and type and its output: numel floats, valid during the
 * call only; for max pooling also the window maximum each output took (numel int32, the
 * index h*W + w in its input plane), NULL for other ops. For inspection (activation
 * statistics, masks); it must not call back into the trainer. fn NULL removes it.
 */
typedef void (*remat_forward_hook)(void *ud, int32_t op, remat_op type, const float *out,
                                   const int32_t *argmax, int64_t numel);
void remat_trainer_set_forward_hook(remat_trainer *t, remat_forward_hook fn, void *ud);
/* A parameter, a batch-norm running statistic ("<op>.running_mean", "<op>.running_var")
 * or another value with storage outside the arena, by name: its data,
 * its gradient (NULL if none) and its element count. REMAT_ERR_ARG if unknown. */
remat_status remat_trainer_param(remat_trainer *t, const char *name, float **data,
                                 float **grad, int64_t *numel);
/* Parameters and batch-norm running statistics, in the format of docs/formats.md. */
remat_status remat_trainer_save(const remat_trainer *t, const char *path);
remat_status remat_trainer_load(remat_trainer *t, const char *path);

/* Data files, token files and ONNX models: remat_io.h, part of this interface. */
#include "remat_io.h"

#ifdef __cplusplus
}
#endif
#endif /* REMAT_H */
