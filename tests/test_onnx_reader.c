/*
 * test_onnx_reader.c - the ONNX reader on its own (no PyTorch needed): tests/data/
 * tiny.onnx (tools/make_onnx_seed.py) read into the graph its export describes (ops and
 * parameter count worked out by hand), every truncation and thousands of corrupted
 * copies refused or read without a crash, and small models built here with protobuf-c
 * that break one rule each (unknown op (Softsign), dangling name, cycle, opset, huge dimensions,
 * data that does not match its dims, asymmetric padding, two inputs, garbage): each must
 * give one clear error naming what and where.
 */
#include "harness.h"
#include "onnx.pb-c.h"

#include <stdlib.h>
#include <string.h>

#define TINY "tests/data/tiny.onnx"

/* protobuf-c's fields are char *; the names here are literals it never writes to. */
static char *S(const char *s)
{
    return (char *)(uintptr_t)s;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b;
    long sz;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* Reads n bytes; the status (the graph and weights freed). */
static remat_status try_read(const void *d, size_t n, const remat_onnx_opts *o)
{
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    remat_status st = remat_onnx_read_buffer(d, n, "case", o, NULL, &g, &w);

    CHECK((st == REMAT_OK) == (g != NULL && w != NULL), "graph and weights iff OK");
    remat_graph_free(g);
    remat_onnx_weights_free(w);
    return st;
}

static void test_tiny(void)
{
    remat_graph *g = NULL;
    remat_onnx_weights *w = NULL;
    int64_t shape[4];

    CHECK_OR(remat_onnx_read(TINY, NULL, NULL, &g, &w) == REMAT_OK, return, "%s",
             remat_errmsg());
    /* 22 nodes: 3 Constants (Pad's pads, Dropout's ratio and training flag) are not ops,
     * the zero Pad is the identity; 18 ops plus the loss */
    CHECK_I64(remat_graph_n_ops(g), 19);
    /* conv1 108, bn1 8, conv2 144+4, bn2 8, conv3 144+4, bn3 8, side 8+2, fc 18+3 */
    CHECK_I64(remat_graph_n_params(g), 459);
    CHECK_I64(remat_graph_value_shape(g, 0, shape), 4);
    CHECK(shape[0] == 2 && shape[1] == 3 && shape[2] == 12 && shape[3] == 12,
          "input %lldx%lldx%lldx%lld", (long long)shape[0], (long long)shape[1],
          (long long)shape[2], (long long)shape[3]);
    remat_graph_free(g);
    remat_onnx_weights_free(w);
    /* the batch override */
    CHECK_OR(remat_onnx_read(TINY, &(remat_onnx_opts){.batch = 5}, NULL, &g, &w) == REMAT_OK,
             return, "%s", remat_errmsg());
    remat_graph_value_shape(g, 0, shape);
    CHECK_I64(shape[0], 5);
    remat_graph_free(g);
    remat_onnx_weights_free(w);
}

static void test_truncated_and_corrupt(void)
{
    size_t n, refused = 0, ok = 0;
    uint8_t *b = slurp(TINY, &n), *c;
    uint64_t s = 12345;

    CHECK_OR(b, return, "cannot read %s", TINY);
    for (size_t len = 0; len < n; len++) {
        remat_status st = try_read(b, len, NULL);

        CHECK_OR(st != REMAT_OK && strstr(remat_errmsg(), "case"), break,
                 "truncated at %zu of %zu bytes: %s (%s)", len, n, remat_status_name(st),
                 remat_errmsg());
    }
    c = malloc(n);
    REMAT_ASSERT_TEST(c);
    for (int k = 0; k < 3000; k++) {
        memcpy(c, b, n);
        for (int j = 0; j <= k % 4; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            c[(s >> 33) % n] ^= (uint8_t)(1u << ((s >> 29) & 7));
        }
        if (try_read(c, n, NULL) == REMAT_OK)
            ok++;
        else
            refused++;
    }
    printf("  %zu truncations refused; 3000 corrupted copies: %zu refused, %zu still read\n",
           n, refused, ok);
    free(c);
    free(b);
}

/* ------------------------------------------------------------ built models */

struct mb {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto op, *ops[1];
    Onnx__NodeProto nodes[4], *pn[4];
    Onnx__ValueInfoProto vin[2], vout, *pin[2], *pout[1];
    Onnx__TypeProto tin[2], tout;
    Onnx__TypeProto__Tensor ttin[2], ttout;
    Onnx__TensorShapeProto sin[2];
    Onnx__TensorShapeProto__Dimension din[2][4], *pdin[2][4];
    Onnx__TensorProto init[2], *pinit[2];
    Onnx__AttributeProto attr[4], *pattr[4][4];
    char *in_names[4][3], *out_names[4][1];
};

/* A model with input "x" (2, 3, 8, 8), n_nodes nodes (filled by the caller) and output
 * out; opset given. */
static void mb_init(struct mb *b, int opset, int n_nodes, const char *out)
{
    memset(b, 0, sizeof *b);
    b->m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    b->g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    b->op = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    b->op.has_version = 1;
    b->op.version = opset;
    b->op.domain = S("");
    b->ops[0] = &b->op;
    b->m.n_opset_import = 1;
    b->m.opset_import = b->ops;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.graph = &b->g;
    for (int k = 0; k < 2; k++) {
        static const int64_t dims[4] = {2, 3, 8, 8};

        b->vin[k] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
        b->vin[k].name = S((k ? "x2" : "x"));
        b->tin[k] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
        b->tin[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        b->ttin[k] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
        b->ttin[k].has_elem_type = 1;
        b->ttin[k].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        b->sin[k] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
        for (int i = 0; i < 4; i++) {
            b->din[k][i] =
                (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            b->din[k][i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            b->din[k][i].dim_value = dims[i];
            b->pdin[k][i] = &b->din[k][i];
        }
        b->sin[k].n_dim = 4;
        b->sin[k].dim = b->pdin[k];
        b->ttin[k].shape = &b->sin[k];
        b->tin[k].tensor_type = &b->ttin[k];
        b->vin[k].type = &b->tin[k];
        b->pin[k] = &b->vin[k];
    }
    b->g.n_input = 1;
    b->g.input = b->pin;
    b->vout = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->vout.name = S(out);
    b->pout[0] = &b->vout;
    b->g.n_output = 1;
    b->g.output = b->pout;
    for (int i = 0; i < n_nodes; i++) {
        b->nodes[i] = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
        b->pn[i] = &b->nodes[i];
    }
    b->g.n_node = (size_t)n_nodes;
    b->g.node = b->pn;
}

/* Node i: op type, inputs (NULL-terminated, up to 3), one output. */
static void mb_node(struct mb *b, int i, const char *type, const char *name,
                    const char *in0, const char *in1, const char *out)
{
    Onnx__NodeProto *n = &b->nodes[i];

    n->op_type = S(type);
    n->name = S(name);
    b->in_names[i][0] = S(in0);
    b->in_names[i][1] = S(in1);
    n->n_input = in1 ? 2 : 1;
    n->input = b->in_names[i];
    b->out_names[i][0] = S(out);
    n->n_output = 1;
    n->output = b->out_names[i];
}

/* The model's one initializer, "w": a float tensor of nd dims holding n values. */
static void mb_weight(struct mb *b, int64_t *dims, size_t nd, float *data, size_t n)
{
    b->init[0] = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    b->init[0].name = S("w");
    b->init[0].n_dims = nd;
    b->init[0].dims = dims;
    b->init[0].has_data_type = 1;
    b->init[0].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    b->init[0].n_float_data = n;
    b->init[0].float_data = data;
    b->pinit[0] = &b->init[0];
    b->g.n_initializer = 1;
    b->g.initializer = b->pinit;
}

/* Adds an attribute to node i: n ints, or with ints NULL the integer v. */
static void mb_attr(struct mb *b, int i, const char *name, int64_t *ints, size_t n, int64_t v)
{
    size_t k = 0;
    Onnx__AttributeProto *a;

    for (int q = 0; q < 4; q++) /* the slots that earlier attributes took */
        k += b->nodes[q].n_attribute;
    a = &b->attr[k];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = S(name);
    if (ints) {
        a->n_ints = n;
        a->ints = ints;
    } else {
        a->has_i = 1;
        a->i = v;
    }
    b->pattr[i][b->nodes[i].n_attribute++] = a;
    b->nodes[i].attribute = b->pattr[i];
}

/* Packs and reads b; checks the status and that the message has every word of want. */
static void mb_expect(struct mb *b, const char *what, remat_status want_st,
                      const char *const *want)
{
    size_t n = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = malloc(n + 1);
    remat_status st;

    REMAT_ASSERT_TEST(buf);
    onnx__model_proto__pack(&b->m, buf);
    st = try_read(buf, n, NULL);
    CHECK(st == want_st, "%s: %s, want %s (%s)", what, remat_status_name(st),
          remat_status_name(want_st), remat_errmsg());
    for (; want && *want; want++)
        CHECK(strstr(remat_errmsg(), *want), "%s: the message lacks '%s': %s", what, *want,
              remat_errmsg());
    printf("  %-28s %s\n", what, remat_errmsg());
    free(buf);
}

static void test_broken_models(void)
{
    struct mb b;

    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Softsign", "act7", "x", NULL, "y");
    mb_expect(&b, "unknown op", REMAT_ERR_UNSUPPORTED,
              (const char *const[]){"Softsign", "act7", "opset 13", "node 0", NULL});

    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Relu", "r", "ghost", NULL, "y");
    mb_expect(&b, "dangling name", REMAT_ERR_PARSE, (const char *const[]){"ghost", "r", NULL});

    mb_init(&b, 13, 2, "b");
    mb_node(&b, 0, "Relu", "first", "b", NULL, "a");
    mb_node(&b, 1, "Relu", "second", "a", NULL, "b");
    mb_expect(&b, "cycle", REMAT_ERR_PARSE,
              (const char *const[]){"first", "'b'", "topological", NULL});

    mb_init(&b, 9, 1, "y");
    mb_node(&b, 0, "Relu", "r", "x", NULL, "y");
    mb_expect(&b, "opset 9", REMAT_ERR_UNSUPPORTED, (const char *const[]){"opset 9", NULL});

    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Relu", "r", "x", NULL, "y");
    b.din[0][2].dim_value = (int64_t)1 << 40;
    mb_expect(&b, "huge input", REMAT_ERR_PARSE, (const char *const[]){"'x'", NULL});

    /* a weight that claims 2^40 elements and holds 4 */
    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Conv", "c", "x", "w", "y");
    {
        static int64_t dims[4] = {1 << 20, 1 << 20, 1, 1};
        static float four[4];

        mb_weight(&b, dims, 4, four, 4);
    }
    mb_expect(&b, "dims and data disagree", REMAT_ERR_PARSE,
              (const char *const[]){"'w'", "disagree", NULL});

    /* asymmetric pads */
    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "MaxPool", "p", "x", NULL, "y");
    {
        static int64_t k[2] = {2, 2}, pads[4] = {0, 0, 1, 1};

        mb_attr(&b, 0, "kernel_shape", k, 2, 0);
        mb_attr(&b, 0, "pads", pads, 4, 0);
    }
    mb_expect(&b, "asymmetric pads", REMAT_ERR_UNSUPPORTED,
              (const char *const[]){"asymmetric", "MaxPool", NULL});

    /* a mean over an axis the input lacks */
    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "ReduceMean", "m", "x", NULL, "y");
    {
        static int64_t axes[2] = {1, 7};

        mb_attr(&b, 0, "axes", axes, 2, 0);
    }
    mb_expect(&b, "mean over a missing axis", REMAT_ERR_PARSE,
              (const char *const[]){"ReduceMean", "'m'", "axis 7 of a 4-d tensor", NULL});

    /* a second input of another type */
    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Add", "a", "x", "x2", "y");
    b.g.n_input = 2;
    b.ttin[1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    mb_expect(&b, "a float64 input", REMAT_ERR_UNSUPPORTED,
              (const char *const[]){"'x2'", "not a float tensor", NULL});

    /* int64 token ids have 1 to 3 dimensions */
    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Add", "a", "x", "x2", "y");
    b.g.n_input = 2;
    b.ttin[1].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    mb_expect(&b, "4-d int64 token ids", REMAT_ERR_UNSUPPORTED,
              (const char *const[]){"'x2'", "(1 to 3 expected)", NULL});

    /* a linear layer's output cut by a Split whose sizes overflow when summed (found by
     * fuzz_onnx: the sum of two near-2^63 sizes was signed overflow) */
    mb_init(&b, 11, 2, "y");
    mb_node(&b, 0, "MatMul", "mm", "x", "w", "h");
    mb_node(&b, 1, "Split", "sp", "h", NULL, "y");
    {
        static int64_t dims[2] = {8, 24}, sizes[3] = {INT64_MAX - 5, INT64_MAX - 5, 34};
        static float wv[8 * 24];
        static char *outs[3];

        outs[0] = S("y");
        outs[1] = S("k");
        outs[2] = S("v");
        mb_weight(&b, dims, 2, wv, 8 * 24);
        b.nodes[1].n_output = 3;
        b.nodes[1].output = outs;
        mb_attr(&b, 1, "split", sizes, 3, 0);
        mb_attr(&b, 1, "axis", NULL, 0, -1);
    }
    mb_expect(&b, "split sizes past the features", REMAT_ERR_SHAPE,
              (const char *const[]){"split sizes do not fit 24", "'sp'", NULL});

    /* a 4-d output is not logits */
    mb_init(&b, 13, 1, "y");
    mb_node(&b, 0, "Relu", "r", "x", NULL, "y");
    mb_expect(&b, "4-d output", REMAT_ERR_UNSUPPORTED, (const char *const[]){"logits", NULL});

    {
        static const char junk[] = "this is not a protobuf at all \xff\xff\xff\xff";

        CHECK(try_read(junk, sizeof junk, NULL) == REMAT_ERR_PARSE &&
                  strstr(remat_errmsg(), "not an ONNX model"),
              "garbage: %s", remat_errmsg());
    }
    CHECK(remat_onnx_read("/nonexistent/m.onnx", NULL, NULL, &(remat_graph *){NULL},
                          &(remat_onnx_weights *){NULL}) == REMAT_ERR_IO,
          "missing file: %s", remat_errmsg());
}

int main(void)
{
    RUN(test_tiny);
    RUN(test_truncated_and_corrupt);
    RUN(test_broken_models);
    return harness_end();
}
