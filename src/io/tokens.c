/*
 * tokens.c - token data for language models: a token file (docs/formats.md) or any
 * other file read as bytes (vocabulary 256), read whole into memory and checked once
 * (the header against the file's size, every token below the vocabulary); batches of
 * sequences at offsets drawn from a counter-based hash of (seed, step, sequence), so
 * that a batch depends on nothing but its arguments. Also what a trainer does with each
 * int32 value of a graph (token ids, targets, positions, class labels).
 *
 * Sizes: the file's bytes are kept as they are (1, 2 or 4 bytes a token), so a corpus
 * takes its file's size in memory; opening is one pass over the tokens, a batch reads
 * batch * (seq_len + 1) tokens.
 */
#include "io/tokens.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

enum { TOK_HEADER = 32, TOK_VERSION = 1 };

struct remat_tokens {
    int64_t count, vocab;
    int width;                /* bytes a token: 1 (bytes of text), 2 or 4 */
    unsigned char *bytes;     /* the whole file */
    const unsigned char *tok; /* its first token */
    char *path;               /* for messages */
};

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Token i as the file holds it (an int32 token may read negative). */
static int64_t token_at(const remat_tokens *t, int64_t i)
{
    const unsigned char *p = t->tok + (size_t)i * (size_t)t->width;

    if (t->width == 1)
        return p[0];
    if (t->width == 2)
        return (int64_t)p[0] | (int64_t)p[1] << 8;
    return (int32_t)get_u32(p);
}

void remat_tokens_free(remat_tokens *t)
{
    if (!t)
        return;
    free(t->bytes);
    free(t->path);
    free(t);
}

/* The whole file into *bytes (a regular file of at least one byte). */
static remat_status read_whole(const char *path, unsigned char **bytes, size_t *size)
{
    struct stat sb;
    remat_status st = REMAT_OK;
    FILE *f = fopen(path, "rb");

    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fileno(f), &sb)) {
        st = REMAT_FAIL(REMAT_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size <= 0) {
        st = REMAT_FAIL(REMAT_ERR_IO, "%s: %s", path,
                        S_ISDIR(sb.st_mode) ? "is a directory"
                        : !S_ISREG(sb.st_mode) ? "not a regular file" : "empty file");
        goto out;
    }
    *size = (size_t)sb.st_size;
    *bytes = malloc(*size);
    if (!*bytes) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory for its %zu bytes", path, *size);
        goto out;
    }
    if (fread(*bytes, 1, *size, f) != *size)
        st = REMAT_FAIL(REMAT_ERR_IO, "%s: read error", path);
out:
    fclose(f);
    return st;
}

/* A token file's header, and its token count against the file's size. */
static remat_status parse_header(remat_tokens *t, size_t size)
{
    const unsigned char *b = t->bytes;
    const char *p = t->path;
    uint32_t version, width, zero;
    uint64_t count, have;
    int64_t vocab;

    if (size < TOK_HEADER)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: truncated header: the file has %zu bytes, a "
                          "token file's header %d (docs/formats.md)", p, size, TOK_HEADER);
    version = get_u32(b + 8);
    width = get_u32(b + 12);
    count = (uint64_t)get_u32(b + 16) | (uint64_t)get_u32(b + 20) << 32;
    vocab = (int32_t)get_u32(b + 24);
    zero = get_u32(b + 28);
    if (version != TOK_VERSION)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: version %u at byte 8; this remat reads "
                          "version %d", p, version, TOK_VERSION);
    if (width != 2 && width != 4)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: token width %u at byte 12: 2 (uint16) or 4 "
                          "(int32)", p, width);
    if (count == 0 || count > INT64_MAX)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: token count %llu at byte 16: 1 to 2^63 - 1",
                          p, (unsigned long long)count);
    if (vocab <= 0 || (width == 2 && vocab > 65536))
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: vocabulary %lld at byte 24: 1 to %s", p,
                          (long long)vocab, width == 2 ? "65536 with 2-byte tokens" : "2^31 - 1");
    if (zero)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: bytes 28 to 31 (reserved) hold %u, not 0", p,
                          zero);
    have = (uint64_t)(size - TOK_HEADER) / width;
    if (count > have)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: truncated: the header says %llu tokens of %u "
                          "bytes, the file ends at byte %zu, within token %llu", p,
                          (unsigned long long)count, width, size, (unsigned long long)have);
    if (count * width != size - TOK_HEADER)
        return REMAT_FAIL(REMAT_ERR_PARSE, "%s: %llu bytes from byte %llu on follow the "
                          "header's %llu tokens", p,
                          (unsigned long long)(size - TOK_HEADER - count * width),
                          (unsigned long long)(TOK_HEADER + count * width),
                          (unsigned long long)count);
    t->count = (int64_t)count;
    t->vocab = vocab;
    t->width = (int)width;
    t->tok = b + TOK_HEADER;
    return REMAT_OK;
}

/* "REMAT" and three capitals: another remat file (REMATDAT, REMATPRM), not text. */
static bool other_magic(const unsigned char *b, size_t size)
{
    if (size < 8 || memcmp(b, "REMAT", 5))
        return false;
    for (int i = 5; i < 8; i++)
        if (b[i] < 'A' || b[i] > 'Z')
            return false;
    return true;
}

static remat_status check_tokens(const remat_tokens *t)
{
    for (int64_t i = 0; i < t->count; i++) {
        int64_t v = token_at(t, i);

        if (v < 0 || v >= t->vocab)
            return REMAT_FAIL(REMAT_ERR_PARSE, "%s: token %lld (byte offset %lld) is %lld, "
                              "not below the vocabulary %lld", t->path, (long long)i,
                              (long long)(t->tok - t->bytes) + (long long)i * t->width,
                              (long long)v, (long long)t->vocab);
    }
    return REMAT_OK;
}

remat_status remat_tokens_open(const char *path, remat_tokens **out)
{
    remat_tokens *t;
    size_t size = 0;
    remat_status st;

    if (!out || !path)
        return REMAT_FAIL(REMAT_ERR_ARG, "remat_tokens_open: no path or no place for the result");
    *out = NULL;
    t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory opening '%s'", path);
    }
    if ((st = read_whole(path, &t->bytes, &size)))
        goto out;
    if (size >= 8 && !memcmp(t->bytes, "REMATTOK", 8)) {
        st = parse_header(t, size);
    } else if (other_magic(t->bytes, size)) {
        st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: starts with '%.8s', another remat file's magic; "
                        "a token file starts with REMATTOK (docs/formats.md)", path,
                        (const char *)t->bytes);
    } else { /* bytes of text */
        t->count = (int64_t)size;
        t->vocab = 256;
        t->width = 1;
        t->tok = t->bytes;
    }
    if (!st && !(st = check_tokens(t))) {
        *out = t;
        t = NULL;
    }
out:
    remat_tokens_free(t);
    return st;
}

int64_t remat_tokens_count(const remat_tokens *t)
{
    return t ? t->count : 0;
}

int64_t remat_tokens_vocab(const remat_tokens *t)
{
    return t ? t->vocab : 0;
}

/* Writes the header and the tokens little-endian, width bytes each. */
static remat_status write_file(const char *path, FILE *f, int64_t vocab, int width,
                               const int32_t *tokens, int64_t n)
{
    unsigned char hdr[TOK_HEADER], buf[4096];
    size_t used = 0;

    memcpy(hdr, "REMATTOK", 8);
    put_u32(hdr + 8, TOK_VERSION);
    put_u32(hdr + 12, (uint32_t)width);
    put_u32(hdr + 16, (uint32_t)n);
    put_u32(hdr + 20, (uint32_t)((uint64_t)n >> 32));
    put_u32(hdr + 24, (uint32_t)vocab);
    put_u32(hdr + 28, 0);
    if (fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr)
        return REMAT_FAIL(REMAT_ERR_IO, "%s: write error", path);
    for (int64_t i = 0; i < n; i++) {
        put_u32(buf + used, (uint32_t)tokens[i]); /* the low width bytes are the token */
        used += (size_t)width;
        if ((used + 4 > sizeof buf || i + 1 == n) && fwrite(buf, 1, used, f) != used)
            return REMAT_FAIL(REMAT_ERR_IO, "%s: write error", path);
        if (used + 4 > sizeof buf)
            used = 0;
    }
    return REMAT_OK;
}

remat_status remat_tokens_write(const char *path, int64_t vocab, const int32_t *tokens,
                                int64_t n)
{
    remat_status st;
    FILE *f;

    if (!path || !tokens || n < 1 || vocab < 1 || vocab > INT32_MAX)
        return REMAT_FAIL(REMAT_ERR_ARG, "a token file needs a path, 1 or more tokens and a "
                          "vocabulary of 1 to 2^31 - 1 (got %lld tokens, vocabulary %lld)",
                          (long long)n, (long long)vocab);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return REMAT_FAIL(REMAT_ERR_ARG, "%s: token %lld is %d, not in 0 .. %lld", path,
                              (long long)i, (int)tokens[i], (long long)vocab - 1);
    f = fopen(path, "wb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    st = write_file(path, f, vocab, vocab <= 65536 ? 2 : 4, tokens, n);
    if (fclose(f) && !st)
        st = REMAT_FAIL(REMAT_ERR_IO, "%s: write error", path);
    return st;
}

/* Sebastiano Vigna's splitmix64 finaliser of x + the golden-ratio increment. */
static uint64_t splitmix64(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The start of sequence b of a step among n starts, each equally likely: draws of h at
 * or above the largest multiple of n below 2^64 are redrawn. */
static int64_t start_of(uint64_t seed, int64_t step, int64_t b, uint64_t n)
{
    uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t)step) ^ (uint64_t)b);
    uint64_t rem = (0 - n) % n; /* 2^64 mod n */

    while (rem && h >= 0 - rem)
        h = splitmix64(h);
    return (int64_t)(h % n);
}

remat_status remat_tokens_batch(const remat_tokens *t, uint64_t seed, int64_t step,
                                int64_t batch, int64_t seq_len, int32_t *ids,
                                int32_t *targets)
{
    if (!t || batch < 1 || seq_len < 1)
        return REMAT_FAIL(REMAT_ERR_ARG, "a token batch needs a file, a batch of 1 or more and "
                          "a sequence length of 1 or more (got %lld and %lld)",
                          (long long)batch, (long long)seq_len);
    if (t->count <= seq_len)
        return REMAT_FAIL(REMAT_ERR_ARG, "%s: %lld tokens, too few for a sequence of %lld "
                          "(it takes %lld: the ids and the target after the last)", t->path,
                          (long long)t->count, (long long)seq_len, (long long)seq_len + 1);
    for (int64_t b = 0; b < batch; b++) {
        int64_t off = start_of(seed, step, b, (uint64_t)(t->count - seq_len));

        for (int64_t s = 0; s < seq_len; s++) {
            if (ids)
                ids[b * seq_len + s] = (int32_t)token_at(t, off + s);
            if (targets)
                targets[b * seq_len + s] = (int32_t)token_at(t, off + s + 1);
        }
    }
    return REMAT_OK;
}

remat_token_role tokens_role(const remat_graph *g, int32_t v, int64_t *vocab, int32_t *reader)
{
    const struct gvalue *gv = graph_value(g, v);
    remat_token_role role = REMAT_TOKEN_LABELS;
    int64_t bound = -1;
    int32_t by = -1;

    if (gv->positions) {
        *vocab = gv->shape[gv->ndim - 1];
        if (reader)
            *reader = -1;
        return REMAT_TOKEN_POSITIONS;
    }
    for (int32_t o = 0; o < (int32_t)g->ops.n; o++) {
        const struct gop *op = graph_op(g, o);
        int64_t b = -1;

        if (op->type == REMAT_OP_SOFTMAX_CE && op->in[1] == v) {
            b = graph_value(g, op->in[0])->shape[1];
        } else if (op->type == REMAT_OP_EMBEDDING && op->in[0] == v) {
            b = op->at.vocab;
            role = REMAT_TOKEN_IDS;
        } else if (op->type == REMAT_OP_TOKEN_CE && op->in[1] == v) {
            const struct gvalue *x = graph_value(g, op->in[0]);

            b = x->shape[x->ndim - 1];
            role = role == REMAT_TOKEN_IDS ? role : REMAT_TOKEN_TARGETS;
        }
        if (b >= 0 && (bound < 0 || b < bound)) {
            bound = b;
            by = o;
        }
    }
    *vocab = bound < 0 ? 2 : bound;
    if (reader)
        *reader = by;
    return role;
}

/* The message for entry x at index i of int32 value gv. */
static remat_status entry_outside(const remat_graph *g, const struct gvalue *gv,
                                  remat_token_role role, int32_t x, int64_t i, int64_t vocab,
                                  int32_t by)
{
    int64_t last = gv->shape[gv->ndim - 1];
    const char *what = role == REMAT_TOKEN_IDS ? "token id" : role == REMAT_TOKEN_TARGETS
                       ? "target" : "label";
    char reader[160] = "no op reads it";

    if (by >= 0)
        snprintf(reader, sizeof reader, "%s of %s '%s'", role == REMAT_TOKEN_IDS
                 ? "the vocabulary" : "the classes", remat_op_name(graph_op(g, by)->type),
                 graph_op(g, by)->name ? graph_op(g, by)->name : "?");
    return REMAT_FAIL(REMAT_ERR_ARG, "%s '%s': %s %d at index %lld (row %lld, column %lld) "
                      "is outside 0 .. %lld (%s)", role == REMAT_TOKEN_LABELS ? "labels"
                      : "tokens", gv->name, what, (int)x, (long long)i, (long long)(i / last),
                      (long long)(i % last), (long long)vocab - 1, reader);
}

remat_status tokens_check(const remat_graph *g, const int32_t *const *tokens)
{
    int32_t k = 0;

    for (int32_t v = 0; tokens && v < (int32_t)g->values.n; v++) {
        const struct gvalue *gv = graph_value(g, v);
        const int32_t *x;
        remat_token_role role;
        int64_t vocab;
        int32_t by;

        if (gv->kind != VK_LABEL)
            continue;
        x = tokens[k++];
        if (!x || gv->positions)
            continue;
        role = tokens_role(g, v, &vocab, &by);
        for (int64_t i = 0; i < graph_numel(gv); i++)
            if ((x[i] < 0 && role != REMAT_TOKEN_TARGETS) || x[i] >= vocab)
                return entry_outside(g, gv, role, x[i], i, vocab, by);
    }
    return REMAT_OK;
}

int32_t remat_graph_token_values(const remat_graph *g, remat_token_value *out, int32_t max)
{
    int32_t k = 0;

    for (int32_t v = 0; g && v < (int32_t)g->values.n; v++) {
        const struct gvalue *gv = graph_value(g, v);

        if (gv->kind != VK_LABEL)
            continue;
        if (out && k < max) {
            out[k].value = v;
            out[k].name = gv->name;
            out[k].role = tokens_role(g, v, &out[k].vocab, NULL);
        }
        k++;
    }
    return k;
}
