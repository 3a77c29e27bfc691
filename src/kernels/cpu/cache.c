/*
 * cache.c - the cpu backend's primitive cache, scratch and the helpers every oneDNN
 * family shares: making a primitive with its argument memory objects, running it with
 * the buffers of one kop, and adding a computed gradient into its destination.
 *
 * The cache is a chained hash table of entries keyed by int64 words (cpu_entry_get says
 * what a key holds); it doubles its buckets when it holds more entries than buckets.
 * ResNet-50 makes about 100 entries, so its size never matters. Entries live until the
 * context is freed. Scratch: an entry's regions, then its primitives' scratchpads, from
 * the base the running kop brings (a one-step instance of the arena, which the plan
 * sized); a kop without one (a kernel called directly) uses the context's own buffer,
 * reallocated (not copied) when an entry needing more runs: nothing stays in scratch
 * between two ops.
 */
#include "kernels/cpu/cpu.h"

#include <oneapi/dnnl/dnnl_debug.h>
#include <string.h>

/* Below this many floats an accumulation is a plain loop: a primitive costs more. */
#define ACC_LOOP_MAX 16384

remat_status cpu_fail(const char *call, dnnl_status_t s, const char *file, int line)
{
    return core_fail(REMAT_ERR_UNSUPPORTED, file, line, "oneDNN: %s: %s", call,
                     dnnl_status2str(s));
}

/* The key of (op, pass, want): see cpu.h. Unused words stay zero. */
static void make_key(const struct kop *op, int pass, unsigned want, int64_t *k)
{
    const struct ktensor *t[4] = {op->n_in > 0 ? &op->in[0] : NULL, &op->out, &op->w,
                                  op->n_in > 1 ? &op->in[1] : NULL};
    int n = 0;

    memset(k, 0, sizeof(int64_t) * CPU_KEY_LEN);
    k[n++] = op->type;
    k[n++] = op->algo;
    k[n++] = pass;
    k[n++] = want;
    k[n++] = op->n_in;
    for (int i = 0; i < 4; i++) {
        k[n++] = t[i] ? t[i]->ndim : -1;
        for (int d = 0; d < 4; d++)
            k[n++] = t[i] && d < t[i]->ndim ? t[i]->shape[d] : 0;
    }
    k[n++] = op->w.data != NULL;
    k[n++] = op->b.data != NULL;
    if (op->at) {
        const remat_attrs *a = op->at;
        uint32_t eps, mom;

        memcpy(&eps, &a->eps, sizeof eps);
        memcpy(&mom, &a->momentum, sizeof mom);
        k[n++] = a->kh;
        k[n++] = a->kw;
        k[n++] = a->sh;
        k[n++] = a->sw;
        k[n++] = a->ph;
        k[n++] = a->pw;
        k[n++] = a->dh;
        k[n++] = a->dw;
        k[n++] = a->groups;
        k[n++] = a->out_pad_h;
        k[n++] = a->out_pad_w;
        k[n++] = a->ceil_mode;
        k[n++] = a->count_include_pad;
        k[n++] = a->bias;
        k[n++] = eps;
        k[n++] = mom;
        k[n++] = a->out_channels;
        k[n++] = a->trans_a;
        k[n++] = a->trans_b;
    }
    REMAT_ASSERT(n <= CPU_KEY_LEN);
}

/* FNV-1a 64 over the key's bytes. */
static uint64_t key_hash(const int64_t *k)
{
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < sizeof(int64_t) * CPU_KEY_LEN; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Frees what e holds and e itself. */
static void entry_free(struct cpu_entry *e)
{
    if (!e)
        return;
    for (int i = 0; i < CPU_MAX_PRIM; i++) {
        struct cpu_prim *p = &e->prim[i];

        if (p->p)
            dnnl_primitive_destroy(p->p);
        for (int j = 0; j < p->n_args; j++)
            if (p->mem[j])
                dnnl_memory_destroy(p->mem[j]);
        if (p->spad)
            dnnl_memory_destroy(p->spad);
    }
    free(e);
}

void cpu_cache_free(struct cpu_ctx *c)
{
    for (size_t b = 0; b < c->n_buckets; b++)
        for (struct cpu_entry *e = c->bucket[b], *nx; e; e = nx) {
            nx = e->next;
            entry_free(e);
        }
    free(c->bucket);
    c->bucket = NULL;
    c->n_buckets = c->n_entries = 0;
}

/* Doubles the buckets (or makes the first 64) and rehashes. */
static remat_status grow_buckets(struct cpu_ctx *c)
{
    size_t nb = c->n_buckets ? 2 * c->n_buckets : 64;
    struct cpu_entry **b = calloc(nb, sizeof *b);

    if (!b)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "cpu backend: out of memory growing the cache");
    for (size_t i = 0; i < c->n_buckets; i++)
        for (struct cpu_entry *e = c->bucket[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash % nb];
            b[e->hash % nb] = e;
        }
    free(c->bucket);
    c->bucket = b;
    c->n_buckets = nb;
    return REMAT_OK;
}

/* Grows the scratch to at least bytes (its old contents are dropped). */
static remat_status scratch_reserve(struct cpu_ctx *c, size_t bytes)
{
    void *p;

    if (bytes <= c->scratch_bytes)
        return REMAT_OK;
    bytes = core_align_up(bytes, 4096);
    p = aligned_alloc(64, bytes);
    if (!p)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes of scratch",
                          bytes);
    free(c->scratch);
    c->scratch = p;
    c->scratch_bytes = bytes;
    return REMAT_OK;
}

/* Points c->base at the scratch op runs e with (cpu_entry_get). */
static remat_status entry_base(struct cpu_ctx *c, const struct kop *op, struct cpu_entry *e)
{
    size_t need = e->spad_off + e->spad_bytes;
    remat_status st;

    c->need = need > c->need ? need : c->need;
    if (op->scratch) {
        if (op->scratch_bytes < need)
            return REMAT_FAIL(REMAT_ERR_ARG, "cpu backend: the step brings %zu bytes of "
                              "scratch where its %s needs %zu", op->scratch_bytes,
                              remat_op_name(op->type), need);
        c->base = op->scratch;
        return REMAT_OK;
    }
    if (!c->dry && (st = scratch_reserve(c, need)))
        return st;
    c->base = c->scratch;
    return REMAT_OK;
}

remat_status cpu_entry_get(struct cpu_ctx *c, const struct kop *op, int pass, unsigned want,
                           cpu_build_fn build, struct cpu_entry **out)
{
    int64_t key[CPU_KEY_LEN];
    uint64_t h;
    struct cpu_entry *e;
    remat_status st;

    make_key(op, pass, want, key);
    h = key_hash(key);
    if (c->n_buckets)
        for (e = c->bucket[h % c->n_buckets]; e; e = e->next)
            if (e->hash == h && !memcmp(e->key, key, sizeof key)) {
                *out = e;
                return pass == CPU_PASS_ACC ? REMAT_OK : entry_base(c, op, e);
            }
    if (c->n_entries >= c->n_buckets && (st = grow_buckets(c)))
        return st;
    e = calloc(1, sizeof *e);
    if (!e)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "cpu backend: out of memory making a cache entry");
    memcpy(e->key, key, sizeof key);
    e->hash = h;
    if ((st = build(c, op, want, e)))
        goto fail;
    e->spad_off = core_align_up(e->user_bytes, 64);
    e->next = c->bucket[h % c->n_buckets];
    c->bucket[h % c->n_buckets] = e;
    c->n_entries++;
    *out = e;
    return pass == CPU_PASS_ACC ? REMAT_OK : entry_base(c, op, e);
fail:
    entry_free(e);
    return st;
}

int32_t cpu_region(struct cpu_entry *e, int64_t n)
{
    REMAT_ASSERT(e->n_regions < CPU_MAX_REGION && n >= 0);
    e->region[e->n_regions] = core_align_up(e->user_bytes, 64);
    e->user_bytes = e->region[e->n_regions] + (size_t)n * sizeof(float);
    return e->n_regions++;
}

float *cpu_region_ptr(const struct cpu_ctx *c, const struct cpu_entry *e, int32_t r)
{
    REMAT_ASSERT(r >= 0 && r < e->n_regions);
    return (float *)(c->base + e->region[r]);
}

remat_status cpu_md(dnnl_memory_desc_t *md, int ndims, const int64_t *dims,
                    dnnl_format_tag_t tag)
{
    dnnl_dims_t d;
    remat_status st = REMAT_OK;

    for (int i = 0; i < ndims; i++)
        d[i] = dims[i];
    CPU_TRY(dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, tag));
fail:
    return st;
}

remat_status cpu_pd_make(struct cpu_ctx *c, const_dnnl_op_desc_t d,
                         const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd)
{
    dnnl_primitive_attr_t attr = NULL;
    remat_status st = REMAT_OK;

    *pd = NULL;
    CPU_TRY(dnnl_primitive_attr_create(&attr));
    CPU_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    CPU_TRY(dnnl_primitive_desc_create(pd, d, attr, c->engine, hint));
fail:
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

/* Fills p from its primitive descriptor pd (which it destroys): the arguments among
 * cand[0..n_cand) that pd has, with a memory object each, the scratchpad, the
 * primitive. */
remat_status cpu_prim_from_pd(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                                dnnl_primitive_desc_t pd, const int *cand, int n_cand)
{
    const dnnl_memory_desc_t *md;
    remat_status st = REMAT_OK;
    size_t spad;

    for (int i = 0; i < n_cand; i++) {
        md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, cand[i]);
        if (!md || md->ndims == 0)
            continue;
        REMAT_ASSERT(p->n_args < CPU_MAX_ARGS);
        p->arg[p->n_args] = cand[i];
        CPU_TRY(dnnl_memory_create(&p->mem[p->n_args++], md, c->engine, DNNL_MEMORY_NONE));
    }
    md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    spad = md ? dnnl_memory_desc_get_size(md) : 0;
    if (spad) {
        CPU_TRY(dnnl_memory_create(&p->spad, md, c->engine, DNNL_MEMORY_NONE));
        e->spad_bytes = spad > e->spad_bytes ? spad : e->spad_bytes;
    }
    CPU_TRY(dnnl_primitive_create(&p->p, pd));
    c->n_primitives++;
fail:
    dnnl_primitive_desc_destroy(pd);
    return st;
}

remat_status cpu_prim_make(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                           const_dnnl_op_desc_t d, const_dnnl_primitive_desc_t hint,
                           const int *cand, int n_cand)
{
    dnnl_primitive_desc_t pd = NULL;
    remat_status st = cpu_pd_make(c, d, hint, &pd);

    return st ? st : cpu_prim_from_pd(c, e, p, pd, cand, n_cand);
}

remat_status cpu_reorder_make(struct cpu_ctx *c, struct cpu_entry *e, struct cpu_prim *p,
                              const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                              bool accumulate)
{
    static const int args[] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    remat_status st = REMAT_OK;

    CPU_TRY(dnnl_primitive_attr_create(&attr));
    CPU_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (accumulate) {
        CPU_TRY(dnnl_post_ops_create(&po));
        CPU_TRY(dnnl_post_ops_append_sum(po, 1.0f));
        CPU_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    CPU_TRY(dnnl_reorder_primitive_desc_create(&pd, from, c->engine, to, c->engine, attr));
    st = cpu_prim_from_pd(c, e, p, pd, args, 2);
fail:
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

remat_status cpu_matmul_pd(struct cpu_ctx *c, const dnnl_memory_desc_t *src,
                           const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bias,
                           const dnnl_memory_desc_t *dst, bool accumulate,
                           dnnl_primitive_desc_t *pd)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_matmul_desc_t d;
    remat_status st = REMAT_OK;

    *pd = NULL;
    CPU_TRY(dnnl_matmul_desc_init(&d, src, wei, bias, dst));
    CPU_TRY(dnnl_primitive_attr_create(&attr));
    CPU_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (accumulate) {
        CPU_TRY(dnnl_post_ops_create(&po));
        CPU_TRY(dnnl_post_ops_append_sum(po, 1.0f));
        CPU_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    CPU_TRY(dnnl_primitive_desc_iterator_create(&it, &d, attr, c->engine, NULL));
    do {
        const char *impl = NULL;
        dnnl_primitive_desc_t cand = dnnl_primitive_desc_iterator_fetch(it);

        if (!cand)
            break;
        if (dnnl_primitive_desc_query(cand, dnnl_query_impl_info_str, 0, &impl) ==
                dnnl_success && impl && !strstr(impl, "gemm") && strncmp(impl, "ref", 3)) {
            *pd = cand;
            break;
        }
        dnnl_primitive_desc_destroy(cand);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
fail:
    if (it)
        dnnl_primitive_desc_iterator_destroy(it);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

remat_status cpu_prim_run(struct cpu_ctx *c, const struct cpu_entry *e,
                          const struct cpu_prim *p, const struct cpu_bind *b, int n_b)
{
    dnnl_exec_arg_t a[CPU_MAX_ARGS + 1];
    remat_status st = REMAT_OK;
    int n = 0;

    for (int i = 0; i < p->n_args; i++) {
        void *ptr = NULL;

        for (int j = 0; j < n_b; j++)
            if (b[j].arg == p->arg[i])
                ptr = b[j].ptr;
        REMAT_ASSERT(ptr);
        CPU_TRY(dnnl_memory_set_data_handle(p->mem[i], ptr));
        a[n++] = (dnnl_exec_arg_t){p->arg[i], p->mem[i]};
    }
    if (p->spad) {
        CPU_TRY(dnnl_memory_set_data_handle(p->spad, c->base + e->spad_off));
        a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->spad};
    }
    CPU_TRY(dnnl_primitive_execute(p->p, c->stream, n, a));
    CPU_TRY(dnnl_stream_wait(c->stream));
fail:
    return st;
}

/* The accumulation entry: a binary add with dst = src0, all 1-d of n floats. */
static remat_status build_acc(struct cpu_ctx *c, const struct kop *op, unsigned want,
                              struct cpu_entry *e)
{
    static const int args[] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST};
    dnnl_memory_desc_t md;
    dnnl_binary_desc_t d;
    remat_status st;

    (void)want;
    if ((st = cpu_md(&md, 1, op->out.shape, dnnl_a)))
        return st;
    CPU_TRY(dnnl_binary_desc_init(&d, dnnl_binary_add, &md, &md, &md));
    return cpu_prim_make(c, e, &e->prim[0], &d, NULL, args, 3);
fail:
    return st;
}

remat_status cpu_accumulate(struct cpu_ctx *c, float *dst, const float *src, int64_t n)
{
    struct kop k = {.type = REMAT_OP_COUNT, .out = {NULL, {n, 0, 0, 0}, 1}};
    struct cpu_entry *e;
    remat_status st;

    if (n < ACC_LOOP_MAX) {
        for (int64_t i = 0; i < n; i++)
            dst[i] += src[i];
        return REMAT_OK;
    }
    if ((st = cpu_entry_get(c, &k, CPU_PASS_ACC, 0, build_acc, &e)))
        return st;
    if (e->prim[0].spad) { /* its scratchpad would overlap src (none in practice) */
        for (int64_t i = 0; i < n; i++)
            dst[i] += src[i];
        return REMAT_OK;
    }
    return cpu_prim_run(c, e, &e->prim[0],
                        (const struct cpu_bind[]){{DNNL_ARG_SRC_0, dst},
                                                  {DNNL_ARG_SRC_1, (void *)(uintptr_t)src},
                                                  {DNNL_ARG_DST, dst}},
                        3);
}

remat_status cpu_weighted_forward(struct cpu_ctx *c, const struct kop *op, cpu_build_fn build)
{
    struct cpu_entry *e;
    remat_status st = cpu_entry_get(c, op, CPU_PASS_FWD, 0, build, &e);

    if (st || c->dry) /* cpu_prepare: the entry is made */
        return st;
    return cpu_prim_run(c, e, &e->prim[0],
                        (const struct cpu_bind[]){{DNNL_ARG_SRC, op->in[0].data},
                                                  {DNNL_ARG_WEIGHTS, op->w.data},
                                                  {DNNL_ARG_BIAS, op->b.data},
                                                  {DNNL_ARG_DST, op->out.data}},
                        4);
}

remat_status cpu_weighted_backward(struct cpu_ctx *c, const struct kop *op, cpu_build_fn build)
{
    unsigned want = (op->din[0].data ? W_DX : 0) | (op->dw.data ? W_DW : 0) |
                    (op->db.data ? W_DB : 0);
    struct cpu_entry *e;
    float *dx, *dw, *db;
    remat_status st;

    if (!want)
        return REMAT_OK;
    if ((st = cpu_entry_get(c, op, CPU_PASS_BWD, want, build, &e)))
        return st;
    if (c->dry)
        return REMAT_OK;
    dx = e->n[0] >= 0 ? cpu_region_ptr(c, e, (int32_t)e->n[0]) : NULL;
    dw = e->n[1] >= 0 ? cpu_region_ptr(c, e, (int32_t)e->n[1]) : NULL;
    db = e->n[2] >= 0 ? cpu_region_ptr(c, e, (int32_t)e->n[2]) : NULL;
    {
        const struct cpu_bind b[] = {
            {DNNL_ARG_SRC, op->in[0].data}, {DNNL_ARG_WEIGHTS, op->w.data},
            {DNNL_ARG_DIFF_DST, op->dout.data}, {DNNL_ARG_DIFF_SRC, dx},
            {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, db},
        };

        if (dx && ((st = cpu_prim_run(c, e, &e->prim[0], b, 6)) ||
                   (st = cpu_accumulate(c, op->din[0].data, dx, ktensor_numel(&op->in[0])))))
            return st;
        if (dw && (st = cpu_prim_run(c, e, &e->prim[1], b, 6)))
            return st;
    }
    if (op->dw.data && (st = cpu_accumulate(c, op->dw.data, dw, ktensor_numel(&op->w))))
        return st;
    if (op->db.data && (st = cpu_accumulate(c, op->db.data, db, op->out.shape[1])))
        return st;
    return REMAT_OK;
}
