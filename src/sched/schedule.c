/*
 * schedule.c - the schedule array, step contents, and the liveness pass.
 */
#include "sched/schedule.h"

#include <string.h>

remat_status schedule_new(const remat_allocator *a, remat_schedule **out)
{
    remat_schedule *s = core_calloc(a, 1, sizeof *s);

    *out = NULL;
    if (!s)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory creating a schedule");
    if (a)
        s->al = *a;
    *out = s;
    return REMAT_OK;
}

void remat_schedule_free(remat_schedule *s)
{
    remat_allocator al;
    const remat_allocator *a;

    if (!s)
        return;
    al = s->al;
    a = al.fn ? &al : NULL;
    core_free(a, s->steps, sizeof *s->steps * s->cap);
    core_free(a, s->algo, sizeof *s->algo * (s->n ? s->n : 1));
    core_free(a, s->scratch, sizeof *s->scratch * (s->n ? s->n : 1));
    core_free(a, s, sizeof *s);
}

remat_status schedule_push(remat_schedule *s, remat_step_kind kind, int32_t id)
{
    REMAT_ASSERT(!s->algo); /* the kernels' choices are made last */
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        remat_step *st = core_realloc(s->al.fn ? &s->al : NULL, s->steps,
                                      sizeof *st * s->cap, sizeof *st * cap);

        if (!st)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory growing a schedule to %zu "
                              "steps", cap);
        s->steps = st;
        s->cap = cap;
    }
    s->steps[s->n].kind = kind;
    s->steps[s->n].id = id;
    s->n++;
    return REMAT_OK;
}

remat_status schedule_copy(const remat_schedule *s, remat_schedule **out)
{
    remat_status st = schedule_new(s->al.fn ? &s->al : NULL, out);

    for (size_t i = 0; i < s->n && !st; i++)
        st = schedule_push(*out, s->steps[i].kind, s->steps[i].id);
    if (!st) {
        (*out)->file_order = s->file_order;
        (*out)->arena_cap = s->arena_cap;
        (*out)->held = s->held;
    }
    if (!st && s->algo) {
        const remat_allocator *a = s->al.fn ? &s->al : NULL;

        (*out)->algo = core_calloc(a, s->n ? s->n : 1, sizeof *s->algo);
        (*out)->scratch = core_calloc(a, s->n ? s->n : 1, sizeof *s->scratch);
        if (!(*out)->algo || !(*out)->scratch)
            st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory copying a schedule");
        else {
            memcpy((*out)->algo, s->algo, sizeof *s->algo * s->n);
            memcpy((*out)->scratch, s->scratch, sizeof *s->scratch * s->n);
            (*out)->backend = s->backend;
        }
    }
    if (st) {
        remat_schedule_free(*out);
        *out = NULL;
    }
    return st;
}

size_t remat_schedule_n_steps(const remat_schedule *s)
{
    return s ? s->n : 0;
}

const remat_step *remat_schedule_steps(const remat_schedule *s)
{
    return s ? s->steps : NULL;
}

int32_t step_max_touch(const remat_tgraph *tg)
{
    int32_t m = 1;

    for (int32_t o = 0; o < tg->n_ops; o++) {
        const struct top *op = &tg->ops[o];
        int32_t f = op->n_in + op->n_out, b = op->n_saved + op->n_gin + op->n_gout;

        m = f > m ? f : m;
        m = b > m ? b : m;
    }
    return m;
}

double step_flops(const remat_tgraph *tg, remat_step st)
{
    if (st.kind == REMAT_STEP_FWD)
        return tg->ops[st.id].fwd_flops;
    return st.kind == REMAT_STEP_BWD ? tg->ops[st.id].bwd_flops : 0;
}

static void add_unique(int32_t *list, int32_t *n, int32_t buf)
{
    for (int32_t i = 0; i < *n; i++)
        if (list[i] == buf)
            return;
    list[(*n)++] = buf;
}

void step_touch(const remat_tgraph *tg, remat_step st, int32_t *reads, int32_t *n_reads,
                int32_t *makes, int32_t *n_makes)
{
    const struct top *op = &tg->ops[st.id];

    *n_reads = *n_makes = 0;
    if (st.kind == REMAT_STEP_FWD) {
        for (int32_t i = 0; i < op->n_in; i++)
            if (tgraph_is_planned(tg, op->in[i]))
                add_unique(reads, n_reads, tgraph_fbuf(tg, op->in[i]));
        if (!op->is_view)
            for (int32_t i = 0; i < op->n_out; i++)
                add_unique(makes, n_makes, tgraph_fbuf(tg, op->out[i]));
    } else if (st.kind == REMAT_STEP_BWD) {
        for (int32_t i = 0; i < op->n_saved; i++)
            if (tgraph_is_planned(tg, op->saved[i]))
                add_unique(reads, n_reads, tgraph_fbuf(tg, op->saved[i]));
        for (int32_t i = 0; i < op->n_gin; i++)
            add_unique(reads, n_reads, tgraph_gbuf(tg, op->gin[i]));
        for (int32_t i = 0; i < op->n_gout; i++)
            if (tgraph_is_planned(tg, op->gout[i]))
                add_unique(makes, n_makes, tgraph_gbuf(tg, op->gout[i]));
    }
}

struct free_at {
    size_t after;
    int32_t buf;
};

/* Sorts f[0..n) by (after, buf), every after below steps: counted by step into out (a
 * stable pass), then each step's few frees in order of buffer. count has steps + 1
 * slots, zeroed. */
static void sort_frees(const struct free_at *f, size_t n, size_t steps, size_t *count,
                       struct free_at *out)
{
    for (size_t k = 0; k < n; k++)
        count[f[k].after + 1]++;
    for (size_t i = 0; i < steps; i++)
        count[i + 1] += count[i];
    for (size_t k = 0; k < n; k++)
        out[count[f[k].after]++] = f[k];
    for (size_t k = 1; k < n; k++) { /* runs of one step: a handful each */
        struct free_at x = out[k];
        size_t j = k;

        for (; j > 0 && out[j - 1].after == x.after && out[j - 1].buf > x.buf; j--)
            out[j] = out[j - 1];
        out[j] = x;
    }
}

remat_status schedule_liveness(const remat_tgraph *tg, const remat_schedule *in,
                           remat_schedule **out)
{
    const remat_allocator *a = tgraph_al(tg);
    int32_t n_bufs = 2 * tg->n_values, m = step_max_touch(tg), nr, nm;
    size_t n_frees = 0, cap_frees = (size_t)n_bufs + in->n * (size_t)(3 * m), k = 0;
    int64_t *last = NULL;   /* last use of the live instance, -1 when not live */
    int64_t *last_read = NULL; /* per gradient: the last step that reads it, -1 if none */
    int32_t *reads = NULL, *makes = NULL;
    struct free_at *frees = NULL, *sorted = NULL;
    size_t *count = NULL;
    remat_schedule *s = NULL;
    remat_status st;

    *out = NULL;
    last = core_calloc(a, (size_t)n_bufs, sizeof *last);
    last_read = core_calloc(a, (size_t)tg->n_values + 1, sizeof *last_read);
    reads = core_calloc(a, (size_t)m, sizeof *reads);
    makes = core_calloc(a, (size_t)m, sizeof *makes);
    /* written before read, and its bound is loose (3 per touch of every step): left
     * unzeroed, so that only the pages used are touched */
    if (cap_frees <= SIZE_MAX / sizeof *frees)
        frees = core_alloc(a, cap_frees * sizeof *frees);
    if (!last || !last_read || !reads || !makes || !frees) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the liveness pass");
        goto out;
    }
    for (int32_t b = 0; b < n_bufs; b++)
        last[b] = -1;
    for (int32_t v = 0; v < tg->n_values; v++)
        last_read[v] = -1;
    /* The last step that reads each gradient (as an op's output gradient). */
    for (size_t i = 0; i < in->n; i++)
        if (in->steps[i].kind == REMAT_STEP_BWD)
            for (int32_t j = 0; j < tg->ops[in->steps[i].id].n_gin; j++)
                last_read[tgraph_gbuf(tg, tg->ops[in->steps[i].id].gin[j]) - tg->n_values] =
                    (int64_t)i;
    for (size_t i = 0; i < in->n; i++) {
        remat_step step = in->steps[i];

        if (step.kind != REMAT_STEP_FWD && step.kind != REMAT_STEP_BWD)
            continue;
        step_touch(tg, step, reads, &nr, makes, &nm);
        for (int32_t j = 0; j < nr; j++)
            if (last[reads[j]] >= 0)
                last[reads[j]] = (int64_t)i;
        for (int32_t j = 0; j < nm; j++) {
            int32_t b = makes[j];
            bool dead = step.kind == REMAT_STEP_BWD && last_read[b - tg->n_values] < (int64_t)i;

            /* A FWD of a live value starts a new instance: end the old one. A gradient
             * written after its last read (only in a dump's non-topological record
             * order) is dead: freed at once. */
            if (last[b] >= 0 && (step.kind == REMAT_STEP_FWD || dead)) {
                REMAT_ASSERT(n_frees < cap_frees);
                frees[n_frees++] = (struct free_at){(size_t)last[b], b};
            }
            last[b] = (int64_t)i;
            if (dead) {
                REMAT_ASSERT(n_frees < cap_frees);
                frees[n_frees++] = (struct free_at){i, b};
                last[b] = -1;
            }
        }
        /* A gradient's last read ends its instance. */
        for (int32_t j = 0; step.kind == REMAT_STEP_BWD && j < tg->ops[step.id].n_gin; j++) {
            int32_t b = tgraph_gbuf(tg, tg->ops[step.id].gin[j]);

            if (last[b] >= 0 && last_read[b - tg->n_values] == (int64_t)i) {
                REMAT_ASSERT(n_frees < cap_frees);
                frees[n_frees++] = (struct free_at){(size_t)last[b], b};
                last[b] = -1;
            }
        }
    }
    for (int32_t b = 0; b < n_bufs; b++)
        if (last[b] >= 0) {
            REMAT_ASSERT(n_frees < cap_frees);
            frees[n_frees++] = (struct free_at){(size_t)last[b], b};
        }
    /* sorted: in frees' unused tail when it has room (it is a loose bound), else apart */
    sorted = 2 * n_frees <= cap_frees ? frees + n_frees
                                      : core_alloc(a, (n_frees ? n_frees : 1) * sizeof *sorted);
    count = core_calloc(a, in->n + 1, sizeof *count);
    if (!sorted || !count) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory in the liveness pass");
        goto out;
    }
    sort_frees(frees, n_frees, in->n, count, sorted);
    if ((st = schedule_new(a, &s)))
        goto out;
    s->file_order = in->file_order;
    for (size_t i = 0; i < in->n; i++) {
        if (in->steps[i].kind == REMAT_STEP_FREE)
            continue;
        if ((st = schedule_push(s, in->steps[i].kind, in->steps[i].id)))
            goto out;
        for (; k < n_frees && sorted[k].after == i; k++)
            if ((st = schedule_push(s, REMAT_STEP_FREE, sorted[k].buf)))
                goto out;
    }
    *out = s;
    s = NULL;
out:
    remat_schedule_free(s);
    core_free(a, last, sizeof *last * (size_t)n_bufs);
    core_free(a, last_read, sizeof *last_read * ((size_t)tg->n_values + 1));
    core_free(a, reads, sizeof *reads * (size_t)m);
    core_free(a, makes, sizeof *makes * (size_t)m);
    if (sorted && sorted != frees + n_frees)
        core_free(a, sorted, (n_frees ? n_frees : 1) * sizeof *sorted);
    core_free(a, count, (in->n + 1) * sizeof *count);
    core_free(a, frees, sizeof *frees * cap_frees);
    return st;
}
