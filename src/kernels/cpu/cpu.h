/*
 * cpu.h - the oneDNN kernels (src/kernels/cpu) behind the cpu backend (exec/backend_cpu.c).
 *
 * A context holds a oneDNN CPU engine and stream, a cache of primitives and one scratch
 * buffer. oneDNN 2.6 runs convolution, transposed convolution, batch norm, average
 * pooling (conv.c, norm.c, pool.c) and, on its matmul primitive, linear and the batched
 * matmul (linear.c, matmul.c); layer norm, softmax_last and gelu are threaded loops of
 * our own (seq.c); every other op calls the reference kernels (dispatch.c says why for relu and
 * max pooling), and so do a oneDNN
 * family's backward whose dout is NULL (the constant 1, which only losses see) and
 * average pooling where oneDNN's divisor differs (cpu_can_avg_pool).
 *
 * Cache: each (op type, pass, wanted gradients, shapes, attributes) gets one entry
 * holding its primitives and their memory objects, made on first use; running the same
 * kop again only points the memory objects at the new buffers and executes. Scratch:
 * oneDNN's convolution and batch norm write their gradients (they cannot add), so a
 * backward computes each gradient into the context's scratch and adds it into the
 * destination (kernels.h: gradients accumulate), with a binary add or, where a reorder
 * brings the gradient back to NCHW, the reorder's sum post-op (the matmul primitive of
 * linear and matmul adds by a sum post-op of its own); batch norm also keeps blocked
 * copies of its tensors there, and every primitive its oneDNN scratchpad (scratchpad
 * mode "user"; no implementation that allocates its own is chosen where another
 * exists: cpu_matmul_pd). The buffer grows when an entry is made that needs more, so
 * the first training step may allocate and later steps do not (oneDNN itself allocates
 * a small argument map inside each execute, which is outside our control). ResNet-50 at
 * batch 8, 224x224, 2 threads: at most 53 MiB of scratch in a step under the planner's
 * choice of algorithms (the blocked layouts' copies), 8.7 MiB with every convolution on
 * GEMM (conv_gemm.c; oneDNN's GEMM convolution took 86 MiB, mostly per-thread buffers
 * for its weight gradient), beside a 650 MiB arena.
 *
 * Threads: Debian's oneDNN uses OpenMP; the context calls omp_set_num_threads(threads)
 * (0: all processors) when it is made and before every op, on the calling thread. With a
 * fixed thread count every oneDNN primitive used here is deterministic, so running the
 * same kop twice gives bit-identical results (another thread count may round otherwise).
 *
 * Errors: every oneDNN call is checked; a failure is REMAT_ERR_UNSUPPORTED with the
 * call and oneDNN's status in the message.
 */
#ifndef REMAT_KERNELS_CPU_H
#define REMAT_KERNELS_CPU_H

#include "kernels/kernels.h"

#include <oneapi/dnnl/dnnl.h>

#define CPU_MAX_PRIM 8   /* primitives per cache entry */
#define CPU_MAX_ARGS 10  /* bound arguments per primitive, the scratchpad apart */
#define CPU_KEY_LEN 48   /* int64 words of a cache key */
#define CPU_MAX_REGION 8 /* scratch regions per cache entry */

/* One primitive and the memory objects of its arguments (their data set per run). */
struct cpu_prim {
    dnnl_primitive_t p;
    int32_t n_args;
    int arg[CPU_MAX_ARGS];             /* DNNL_ARG_* */
    dnnl_memory_t mem[CPU_MAX_ARGS];
    dnnl_memory_t spad;                /* its scratchpad, or NULL when it needs none */
};

/* The cached primitives of one kind of kop. */
struct cpu_entry {
    int64_t key[CPU_KEY_LEN];
    uint64_t hash;
    struct cpu_entry *next;            /* hash chain */
    struct cpu_prim prim[CPU_MAX_PRIM];
    size_t region[CPU_MAX_REGION];     /* offsets of the entry's scratch regions */
    int32_t n_regions;
    size_t user_bytes;                 /* the regions' end */
    size_t spad_bytes;                 /* the largest scratchpad of its primitives */
    size_t spad_off;                   /* where the scratchpads go: after the regions */
    int64_t n[24];                     /* indices and sizes the family keeps for its run */
};

struct copier;

struct cpu_ctx {
    struct copier *copier;             /* the backend's copy thread (exec/copier.c) for
                                          the host tier; the kernels do not use it */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;
    dnnl_format_tag_t block4;          /* the blocked 4-d layout: nChw16c (AVX-512), nChw8c */
    struct cpu_entry **bucket;
    size_t n_buckets, n_entries;
    char *scratch;                     /* its own scratch, for kops that bring none;
                                          64-byte aligned */
    size_t scratch_bytes;
    char *base;                        /* the scratch of the op running now: the kop's
                                          or the context's own */
    size_t need;                       /* the most scratch an entry of the op needed */
    int64_t n_primitives;              /* primitives made so far (tests: the cache works) */
    int64_t n_conv_fallback;           /* GEMM convolution entries made on oneDNN's own GEMM
                                          convolution (conv_gemm.c: no matmul of ours) */
    bool dry;                          /* cpu_prepare: make entries, run nothing */
    bool bn_onednn;                    /* batch norm on oneDNN (REMAT_CPU_BN=onednn) rather
                                          than the reference's, threaded per channel */
};

/* An argument's data for a run: the pointer bound to DNNL_ARG_* arg. */
struct cpu_bind {
    int arg;
    void *ptr;
};

/* Makes the files' checks short: on a oneDNN failure, set st and jump to fail. Needs a
 * remat_status st and a label fail in the caller. */
#define CPU_TRY(call)                                                                    \
    do {                                                                                 \
        dnnl_status_t ds_ = (call);                                                      \
        if (ds_ != dnnl_success) {                                                       \
            st = cpu_fail(#call, ds_, __FILE__, __LINE__);                               \
            goto fail;                                                                   \
        }                                                                                \
    } while (0)

/* REMAT_ERR_UNSUPPORTED with "oneDNN: <call>: <status>" at file:line. */
remat_status cpu_fail(const char *call, dnnl_status_t s, const char *file, int line);

/* Makes the entries (primitives) the forward or backward of op will use with its
 * algorithm op->algo, without touching any data: op's tensors need shapes, and non-NULL
 * data exactly where the real call will have it (which gradients are wanted). *need
 * receives the scratch running it takes. REMAT_ERR_UNSUPPORTED when the algorithm
 * cannot run op. */
remat_status cpu_prepare(struct cpu_ctx *c, const struct kop *op, bool backward, size_t *need);

/* The convolution algorithms (conv.c): GEMM on the NCHW buffers (conv_gemm.c: im2col of
 * our own and oneDNN's matmul primitive, scratch for one image's column matrix and the
 * products' scratchpads; oneDNN's GEMM convolution where the matmul primitive has no
 * implementation but the GEMM driver's, a CPU without AVX-512), DIRECT on
 * oneDNN's blocked layouts (JIT kernels; scratch for blocked copies of the tensors),
 * WINOGRAD F(4x4, 3x3) on the blocked layouts (3x3, stride 1, AVX-512; scratch for the
 * transformed tiles as well). Every other op has one algorithm, 0. */
enum { CPU_ALGO_GEMM = 0, CPU_ALGO_DIRECT, CPU_ALGO_WINOGRAD, CPU_N_ALGOS };
const char *cpu_algo_name(int32_t id);
/* The algorithms op's forward or backward can run, fastest first (ids[0..n), n at most
 * CPU_N_ALGOS): those cpu_prepare takes, GEMM always among them (conv.c). */
int32_t cpu_algos(const struct kop *op, bool backward, int32_t *ids);

/* split.c: per-sample ops (their samples independent) on the reference kernels, the
 * batch split across the context's threads; the bits are the reference's. */
bool cpu_per_sample(const struct kop *op);
remat_status cpu_split_run(const struct cpu_ctx *c, const struct kop *op, bool backward);
/* memset(p, 0, bytes) on the context's threads. */
void cpu_zero(const struct cpu_ctx *c, void *p, size_t bytes);

/* ctx.c: the context. */
remat_status cpu_ctx_new(int threads, struct cpu_ctx **out);
void cpu_ctx_free(struct cpu_ctx *c);
/* Sets the OpenMP thread count of the calling thread to the context's. */
void cpu_ctx_threads(const struct cpu_ctx *c);

/* Builds the entry e for (op, want) on its first use: makes its primitives and reserves
 * its scratch regions. On failure the caller frees what e holds. */
typedef remat_status (*cpu_build_fn)(struct cpu_ctx *c, const struct kop *op, unsigned want,
                                     struct cpu_entry *e);

/* cache.c: the cache and what entries share. */
/* The entry for (op, pass, want), made by build on first use. The key is the op type,
 * algorithm, pass, want, the shapes of the first two inputs, the output and the weight,
 * whether w and b are present and the attributes a oneDNN family reads (a matmul's
 * transposes among them); cpu_accumulate keys its entries with type REMAT_OP_COUNT,
 * pass CPU_PASS_ACC and the length as out.shape[0] (they need no scratch). Except for those it also points c->base at the op's scratch: op->scratch
 * (REMAT_ERR_ARG when smaller than the entry needs), or, when the kop brings none, the
 * context's own (grown to fit; not while preparing); and raises c->need to the entry's
 * need. */
remat_status cpu_entry_get(struct cpu_ctx *c, const struct kop *op, int pass, unsigned want,
                           cpu_build_fn build, struct cpu_entry **out);
/* Frees every entry (and its primitives and memory objects). */
void cpu_cache_free(struct cpu_ctx *c);
/* want bits of a backward with weights (conv.c, linear.c) */
enum { W_DX = 1, W_DW = 2, W_DB = 4 };
/* The forward of an op with weights (convolution, linear) whose entry, made by build,
 * has prim[0] reading x, W and b (absent: NULL) and writing y. */
remat_status cpu_weighted_forward(struct cpu_ctx *c, const struct kop *op, cpu_build_fn build);
/* The backward of an op with weights (convolution, linear) whose entry, made by build,
 * has prim[0] backward data and prim[1] backward weights and bias, and scratch regions
 * n[0] dx, n[1] dw, n[2] db (-1: none): runs what is wanted and adds the results into
 * din[0], dw and db (one bias per output channel, out.shape[1]). */
remat_status cpu_weighted_backward(struct cpu_ctx *c, const struct kop *op, cpu_build_fn build);
/* Reserves a scratch region of n floats in e; returns its index. */
int32_t cpu_region(struct cpu_entry *e, int64_t n);
/* The address of region r of e in the running op's scratch (c->base). */
float *cpu_region_ptr(const struct cpu_ctx *c, const struct cpu_entry *e, int32_t r);
/* Makes the primitive descriptor of op descriptor d (hint: the forward primitive
 * descriptor of a backward, or NULL), with the scratchpad mode "user". */
remat_status cpu_pd_make(struct cpu_ctx *c, const_dnnl_op_desc_t d,
                         const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd);
/* Makes primitive p from op descriptor d (and hint). Records the arguments among
 * cand[0..n_cand) that the primitive has, with a memory object each; its scratchpad
 * will come from the running op's scratch at e->spad_off. */
remat_status cpu_prim_make(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                           const_dnnl_op_desc_t d, const_dnnl_primitive_desc_t hint,
                           const int *cand, int n_cand);
/* Makes a reorder from memory laid out as from to memory laid out as to (arguments
 * DNNL_ARG_FROM, DNNL_ARG_TO); with accumulate it adds into to (a sum post-op of scale
 * 1: to = from + to, one rounding, as a reference kernel's +=). */
/* The same from a primitive descriptor made by cpu_pd_make, which it destroys. */
remat_status cpu_prim_from_pd(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                              dnnl_primitive_desc_t pd, const int *cand, int n_cand);
remat_status cpu_reorder_make(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                              const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                              bool accumulate);
/* The primitive descriptor of a oneDNN matmul of src (.., M, K) by wei (.., K, N) into
 * dst (.., M, N) (bias NULL: none; with accumulate a sum post-op adds into dst: one
 * rounding, as a reference kernel's +=), scratchpad mode "user", on the first
 * implementation that is neither oneDNN's GEMM driver ("gemm" in its name: it mallocs
 * its packing buffers outside any scratchpad, so outside the plan) nor its reference
 * loops ("ref": orders of magnitude slower): brg:avx512_core on AVX-512. *pd is NULL
 * when there is none (the caller falls back to the GEMM driver). */
remat_status cpu_matmul_pd(struct cpu_ctx *c, const dnnl_memory_desc_t *src,
                           const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias,
                           const dnnl_memory_desc_t *dst, bool accumulate,
                           dnnl_primitive_desc_t *pd);
/* Runs p with its arguments bound from b[0..n_b) (every argument p has must be bound to
 * a non-NULL pointer), and waits for it. */
remat_status cpu_prim_run(struct cpu_ctx *c, const struct cpu_entry *e,
                          const struct cpu_prim *p, const struct cpu_bind *b, int n_b);
/* dst[0..n) += src[0..n), each element one float addition (oneDNN's binary add with
 * dst = src0 for large n, a loop for small). */
remat_status cpu_accumulate(struct cpu_ctx *c, float *dst, const float *src, int64_t n);
/* A plain memory descriptor of the given dims and tag. */
remat_status cpu_md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                    dnnl_format_tag_t tag);

enum { CPU_PASS_FWD = 0, CPU_PASS_BWD, CPU_PASS_ACC };

/* The families: each forward writes out (and aux); each backward adds into the wanted
 * gradients. can_* say whether oneDNN matches the reference for op; the dispatcher
 * sends the others to the reference kernels. */
remat_status cpu_conv_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_conv_backward(struct cpu_ctx *c, const struct kop *op);
int32_t cpu_conv_algos(const struct kop *op, bool backward, int32_t *ids);
/* conv_gemm.c: the GEMM algorithm of the above. */
remat_status cpu_conv_gemm_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_conv_gemm_backward(struct cpu_ctx *c, const struct kop *op);
/* conv.c: the entries of oneDNN's GEMM convolution, conv_gemm.c's fallback (the forward:
 * prim[0] as cpu_weighted_forward runs it; the backward: as cpu_weighted_backward). Its
 * GEMM driver mallocs packing buffers outside the scratch. */
remat_status cpu_conv_onednn_build_fwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                                       struct cpu_entry *e);
remat_status cpu_conv_onednn_build_bwd(struct cpu_ctx *c, const struct kop *op, unsigned want,
                                       struct cpu_entry *e);
remat_status cpu_bn_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_bn_backward(struct cpu_ctx *c, const struct kop *op);
bool cpu_can_avg_pool(const struct kop *op);
remat_status cpu_avg_pool_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_avg_pool_backward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_linear_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_linear_backward(struct cpu_ctx *c, const struct kop *op);
/* The transformer's ops (matmul.c: the batched product on oneDNN's matmul primitive,
 * scratch for its scratchpad; seq.c: layer norm, softmax over the last axis and GELU as
 * OpenMP loops of our own, no scratch). */
remat_status cpu_matmul_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_matmul_backward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_layer_norm_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_layer_norm_backward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_softmax_last_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_softmax_last_backward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_gelu_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_gelu_backward(struct cpu_ctx *c, const struct kop *op);

/* dispatch.c: the backend's two entry points. */
remat_status cpu_forward(struct cpu_ctx *c, const struct kop *op);
remat_status cpu_backward(struct cpu_ctx *c, const struct kop *op);

#endif
