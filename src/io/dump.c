/*
 * dump.c - reader for the Chainer computational-graph dumps of Kusumoto et al.
 * (cg_*.txt; the format is in docs/formats.md).
 *
 * The whole file is read into memory and split into lines; every record is checked
 * (ids in range, counts that fit the file, a backward record for each forward record
 * with the same type) and any problem is reported with the file name and line. Sizes:
 * the largest dump has about 10^4 lines; everything here is linear in the file.
 */
#include "graph/tgraph.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FILE_BYTES ((size_t)1 << 30)

struct reader {
    const char *path;
    char *text;
    size_t text_bytes;
    char **line;      /* line starts (NUL-terminated in place) */
    size_t n_lines, line_cap, at;
    const remat_allocator *a;
};

struct rentry {
    int32_t id;
    char kind;        /* '_' forward input, 'g' gradient, 'i' input, 'o' output */
};

struct record {
    bool backward;
    int32_t k, p;     /* inputs, outputs */
    struct rentry *in;
    int32_t *out;
    char *type;
    size_t line;      /* 1-based line of its first line */
};

static remat_status perr(const struct reader *r, size_t line, const char *what)
{
    return REMAT_FAIL(REMAT_ERR_PARSE, "%s:%zu: %s", r->path, line, what);
}

static remat_status read_file(struct reader *r)
{
    FILE *f = fopen(r->path, "rb");
    size_t cap = 1 << 16, n = 0, got;
    char *buf = NULL, *nb;
    struct stat sb;

    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", r->path, strerror(errno));
    if (!fstat(fileno(f), &sb) && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return REMAT_FAIL(REMAT_ERR_IO, "%s: is a directory", r->path);
    }
    buf = core_alloc(r->a, cap);
    if (!buf)
        goto nomem;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            if (cap >= MAX_FILE_BYTES) {
                fclose(f);
                core_free(r->a, buf, cap);
                return REMAT_FAIL(REMAT_ERR_PARSE, "'%s' is larger than 1 GiB", r->path);
            }
            nb = core_realloc(r->a, buf, cap, cap * 2);
            if (!nb)
                goto nomem;
            buf = nb;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        fclose(f);
        core_free(r->a, buf, cap);
        return REMAT_FAIL(REMAT_ERR_IO, "cannot read '%s'", r->path);
    }
    fclose(f);
    buf[n] = '\0';
    if (!n)
        return core_free(r->a, buf, cap), perr(r, 1, "empty file");
    if (memchr(buf, '\0', n))
        return core_free(r->a, buf, cap),
               REMAT_FAIL(REMAT_ERR_PARSE, "'%s' is not a text file (it holds NUL bytes)",
                          r->path);
    r->text = buf;
    r->text_bytes = cap;
    return REMAT_OK;
nomem:
    fclose(f);
    core_free(r->a, buf, cap);
    return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory reading '%s'", r->path);
}

static remat_status split_lines(struct reader *r)
{
    size_t n = 1, i = 0;
    char *p = r->text;

    if (!p)
        return REMAT_FAIL(REMAT_ERR_IO, "'%s' was not read", r->path);
    for (; *p; p++)
        n += *p == '\n';
    r->line = core_calloc(r->a, n, sizeof *r->line);
    r->line_cap = n;
    if (!r->line)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory reading '%s'", r->path);
    p = r->text;
    while (*p) {
        char *e = strchr(p, '\n');

        r->line[i++] = p;
        if (!e)
            break;
        *e = '\0';
        if (e > p && e[-1] == '\r')
            e[-1] = '\0';
        p = e + 1;
    }
    r->n_lines = i;
    return REMAT_OK;
}

/* The next line, or NULL at the end of the file. */
static char *next_line(struct reader *r)
{
    return r->at < r->n_lines ? r->line[r->at++] : NULL;
}

/* Parses exactly `n` non-negative integers (below `lim`) from a line. */
static bool ints(const char *s, int n, int64_t *v, int64_t lim)
{
    for (int i = 0; i < n; i++) {
        char *e;

        while (*s == ' ' || *s == '\t')
            s++;
        if (!isdigit((unsigned char)*s))
            return false;
        errno = 0;
        v[i] = strtoll(s, &e, 10);
        if (errno || v[i] < 0 || v[i] >= lim)
            return false;
        s = e;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    return *s == '\0';
}

static remat_status read_record(struct reader *r, struct record *rec, int64_t n_vars)
{
    int64_t v[2];
    char *l = next_line(r);

    rec->line = r->at;
    if (!l)
        return perr(r, r->at + 1, "the file ends where a record should start");
    if (!strcmp(l, "forward"))
        rec->backward = false;
    else if (!strcmp(l, "backward"))
        rec->backward = true;
    else
        return perr(r, r->at, "expected 'forward' or 'backward'");
    if (!(l = next_line(r)) || !ints(l, 2, v, 1 << 20))
        return perr(r, r->at, "expected 'k p' (input and output counts)");
    if ((size_t)(v[0] + v[1] + 2) > r->n_lines - r->at)
        return perr(r, r->at, "the record's counts run past the end of the file");
    rec->k = (int32_t)v[0];
    rec->p = (int32_t)v[1];
    rec->in = core_calloc(r->a, (size_t)rec->k + 1, sizeof *rec->in);
    rec->out = core_calloc(r->a, (size_t)rec->p + 1, sizeof *rec->out);
    if (!rec->in || !rec->out)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory reading '%s'", r->path);
    for (int32_t i = 0; i < rec->k; i++) {
        char *sp;
        const char *kind;

        l = next_line(r);
        sp = l ? strchr(l, ' ') : NULL;
        if (!sp)
            return perr(r, r->at, "expected 'id kind'");
        *sp = '\0';
        kind = sp + 1;
        if (!ints(l, 1, v, n_vars))
            return perr(r, r->at, "bad variable id (not a number below the variable count)");
        rec->in[i].id = (int32_t)v[0];
        if (!rec->backward && !strcmp(kind, "_"))
            rec->in[i].kind = '_';
        else if (rec->backward && !strcmp(kind, "gradient"))
            rec->in[i].kind = 'g';
        else if (rec->backward && !strcmp(kind, "input"))
            rec->in[i].kind = 'i';
        else if (rec->backward && !strcmp(kind, "output"))
            rec->in[i].kind = 'o';
        else
            return perr(r, r->at, rec->backward ? "the kind must be gradient, input or output"
                                                : "the kind of a forward input must be '_'");
    }
    for (int32_t i = 0; i < rec->p; i++) {
        l = next_line(r);
        if (!l || !ints(l, 1, v, n_vars))
            return perr(r, r->at, "bad output variable id");
        rec->out[i] = (int32_t)v[0];
    }
    l = next_line(r);
    if (!l || !*l || strchr(l, ' '))
        return perr(r, r->at, "expected the function's type name");
    rec->type = core_strdup(r->a, l);
    if (!rec->type)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory reading '%s'", r->path);
    l = next_line(r);
    if (!l || l[0] != '{')
        return perr(r, r->at, "expected the function's attributes as a JSON object");
    return REMAT_OK;
}

static void free_records(const remat_allocator *a, struct record *recs, size_t n)
{
    if (!recs)
        return;
    for (size_t i = 0; i < n; i++) {
        core_free(a, recs[i].in, sizeof *recs[i].in * ((size_t)recs[i].k + 1));
        core_free(a, recs[i].out, sizeof *recs[i].out * ((size_t)recs[i].p + 1));
        core_strfree(a, recs[i].type);
    }
    core_free(a, recs, sizeof *recs * n);
}

struct var {
    size_t bytes;
    char *name;
    bool seen;
};

static remat_status read_vars(struct reader *r, struct var *vars, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        char *l = next_line(r), *sp1, *sp2;
        int64_t v[2];

        if (!l)
            return perr(r, r->at + 1, "the file ends inside the variable list");
        sp1 = strchr(l, ' ');
        sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
        if (!sp2 || !sp2[1])
            return perr(r, r->at, "expected 'id bytes name'");
        *sp1 = *sp2 = '\0';
        if (!ints(l, 1, &v[0], n) || !ints(sp1 + 1, 1, &v[1], (int64_t)1 << 50))
            return perr(r, r->at, "bad id or byte count");
        if (vars[v[0]].seen)
            return perr(r, r->at, "variable id listed twice");
        vars[v[0]].seen = true;
        vars[v[0]].bytes = (size_t)v[1];
        vars[v[0]].name = core_strdup(r->a, sp2 + 1);
        if (!vars[v[0]].name)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory reading '%s'", r->path);
    }
    return REMAT_OK;
}

/* Checks the record structure and fills producer[] (forward op of each variable). */
static remat_status check_records(struct reader *r, const struct record *recs, int32_t n_ops,
                                  int32_t *producer, bool *grad)
{
    for (int32_t o = 0; o < n_ops; o++) {
        const struct record *f = &recs[o], *b = &recs[n_ops + o];

        if (f->backward)
            return perr(r, f->line, "a backward record among the forward records (the "
                        "forward records come first)");
        if (!b->backward)
            return perr(r, b->line, "a forward record among the backward records");
        if (strcmp(f->type, b->type))
            return perr(r, b->line, "the backward record's type differs from its forward "
                        "record's (backward records follow the forward order)");
        if (f->p < 1)
            return perr(r, f->line, "a forward record without outputs");
        for (int32_t i = 0; i < f->p; i++) {
            if (producer[f->out[i]] >= 0)
                return perr(r, f->line, "a variable is the output of two records");
            producer[f->out[i]] = o;
        }
        for (int32_t i = 0; i < b->p; i++)
            grad[b->out[i]] = true;
    }
    for (int32_t o = 0; o < n_ops; o++) {
        const struct record *f = &recs[o];

        for (int32_t i = 0; i < f->k; i++)
            if (producer[f->in[i].id] == o)
                return perr(r, f->line, "a record reads its own output");
    }
    return REMAT_OK;
}

static int32_t *take_ints(remat_tgraph *tg, size_t *used, int32_t n)
{
    int32_t *p = tg->ints + *used;

    *used += (size_t)n;
    REMAT_ASSERT(*used <= tg->n_ints);
    return p;
}

static remat_status build(struct reader *r, struct var *vars, struct record *recs,
                          int32_t n_vars, int32_t n_ops, const int32_t *producer,
                          const bool *grad, size_t align, remat_tgraph **out)
{
    remat_tgraph *tg = NULL;
    size_t n_ints = 0, used = 0;
    remat_status s;

    for (int32_t o = 0; o < 2 * n_ops; o++)
        n_ints += (size_t)recs[o].k + (size_t)recs[o].p;
    if ((s = tgraph_alloc(r->a, n_vars, n_ops, n_ints, &tg)))
        return s;
    tg->file_order = true;
    for (int32_t i = 0; i < n_vars; i++) {
        struct tvalue *v = &tg->values[i];
        const char *nm = vars[i].name;

        v->producer = producer[i];
        v->buf = i;
        v->bytes = core_align_up(vars[i].bytes, align);
        v->grad = grad[i] && producer[i] >= 0;
        v->kind = producer[i] >= 0 ? VK_ACT
                  : (isdigit((unsigned char)nm[0]) || !strcmp(nm, "_")) ? VK_INPUT : VK_PARAM;
        if (v->kind == VK_PARAM) {
            tg->resident_bytes += 3 * vars[i].bytes;
            tg->n_params += (int64_t)(vars[i].bytes / 4);
        } else if (v->kind == VK_INPUT) {
            tg->resident_bytes += vars[i].bytes;
        }
        v->name = vars[i].name;
        vars[i].name = NULL;
    }
    for (int32_t o = 0; o < n_ops; o++) {
        struct record *f = &recs[o], *b = &recs[n_ops + o];
        struct top *op = &tg->ops[o];

        op->type = -1;
        op->type_name = f->type;
        f->type = NULL;
        op->file_index = o;
        op->n_in = f->k;
        op->in = take_ints(tg, &used, f->k);
        for (int32_t i = 0; i < f->k; i++)
            op->in[i] = f->in[i].id;
        op->n_out = f->p;
        op->out = take_ints(tg, &used, f->p);
        memcpy(op->out, f->out, sizeof(int32_t) * (size_t)f->p);
        op->saved = take_ints(tg, &used, b->k);
        op->gin = op->saved + b->k; /* filled from the end of the same block */
        for (int32_t i = 0; i < b->k; i++) {
            int32_t id = b->in[i].id;

            if (b->in[i].kind != 'g')
                op->saved[op->n_saved++] = id;
            else if (tg->values[id].grad)
                op->gin[-(++op->n_gin)] = id;
        }
        op->gin -= op->n_gin;
        op->gout = take_ints(tg, &used, b->p);
        for (int32_t i = 0; i < b->p; i++)
            if (tg->values[b->out[i]].grad)
                op->gout[op->n_gout++] = b->out[i];
        op->has_bwd = b->p > 0;
        for (int32_t i = 0; i < f->p; i++)
            tg->values[f->out[i]].cost = strncmp(op->type_name, "Conv", 4) ? 1 : 10;
    }
    tgraph_finish(tg);
    *out = tg;
    return REMAT_OK;
}

remat_status remat_tgraph_read_dump(const char *path, const remat_tgraph_opts *o,
                                    const remat_allocator *a, remat_tgraph **out)
{
    struct reader r = {.path = path, .a = a};
    remat_tgraph_opts opts = {0};
    struct var *vars = NULL;
    struct record *recs = NULL;
    int32_t *producer = NULL;
    bool *grad = NULL;
    int64_t nm[2] = {0, 0};
    size_t n_recs = 0;
    remat_status s;
    char *l;

    if (!out)
        return REMAT_FAIL(REMAT_ERR_ARG, "no place for the training graph");
    *out = NULL;
    if (!path)
        return REMAT_FAIL(REMAT_ERR_ARG, "no file name");
    if (o)
        opts = *o;
    if (opts.cost == REMAT_COST_FLOPS)
        return REMAT_FAIL(REMAT_ERR_ARG, "'%s' is a graph dump, which has no shapes, so its "
                          "FLOPs are unknown: use the kusumoto cost", path);
    if ((unsigned)opts.cost > REMAT_COST_KUSUMOTO)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown cost model %d", (int)opts.cost);
    if ((unsigned)opts.optimizer >= REMAT_OPTIMIZER_COUNT)
        return REMAT_FAIL(REMAT_ERR_ARG, "unknown optimizer %d", (int)opts.optimizer);
    if ((s = read_file(&r)) || (s = split_lines(&r)))
        goto out;
    l = next_line(&r);
    if (!l || !ints(l, 2, nm, 1 << 24) || nm[1] % 2) {
        s = perr(&r, 1, "expected 'n m' (variables, records; m even) on the first line");
        goto out;
    }
    vars = core_calloc(a, (size_t)nm[0] + 1, sizeof *vars);
    recs = core_calloc(a, (size_t)nm[1] + 1, sizeof *recs);
    producer = core_calloc(a, (size_t)nm[0] + 1, sizeof *producer);
    grad = core_calloc(a, (size_t)nm[0] + 1, sizeof *grad);
    if (!vars || !recs || !producer || !grad) {
        s = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory reading '%s'", path);
        goto out;
    }
    for (int64_t i = 0; i < nm[0]; i++)
        producer[i] = -1;
    if ((s = read_vars(&r, vars, nm[0])))
        goto out;
    for (n_recs = 0; n_recs < (size_t)nm[1];) {
        s = read_record(&r, &recs[n_recs], nm[0]);
        n_recs++;
        if (s)
            goto out;
    }
    while ((l = next_line(&r)))
        if (*l) {
            s = perr(&r, r.at, "text after the last record");
            goto out;
        }
    if ((s = check_records(&r, recs, (int32_t)(nm[1] / 2), producer, grad)))
        goto out;
    s = build(&r, vars, recs, (int32_t)nm[0], (int32_t)(nm[1] / 2), producer, grad,
              opts.align ? opts.align : 1, out);
    if (!s) { /* the optimizer's state beyond SGD's momentum (build counts three copies) */
        (*out)->optimizer = opts.optimizer;
        (*out)->resident_bytes += (tgraph_param_copies(opts.optimizer) - 3) *
                                  (size_t)(*out)->n_params * 4;
    }
out:
    if (vars)
        for (int64_t i = 0; i < nm[0]; i++)
            core_strfree(a, vars[i].name);
    core_free(a, vars, sizeof *vars * ((size_t)nm[0] + 1));
    free_records(a, recs, (size_t)nm[1] + 1);
    core_free(a, producer, sizeof *producer * ((size_t)nm[0] + 1));
    core_free(a, grad, sizeof *grad * ((size_t)nm[0] + 1));
    core_free(a, r.line, sizeof *r.line * r.line_cap);
    core_free(a, r.text, r.text_bytes);
    return s;
}
