/*
 * onnx_ops.c - the ONNX ops the reader maps, one function each (docs/onnx.md has the
 * table): each reads its node's inputs and attributes through the reader's helpers
 * (onnx_read.h) and adds remat ops to the graph, or refuses with a message that names the
 * node, its type and the opset.
 */
#include "io/onnx_read.h"
#include "onnx.pb-c.h"

#include <stdio.h>
#include <string.h>

static remat_status op_conv(struct rd *r, bool transposed)
{
    const Onnx__TensorProto *w, *b;
    remat_attrs at = {0};
    int64_t g = ox_attr_i(r, "group", 1), op[2] = {0, 0};
    int32_t x, y;
    bool given;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)) || (st = ox_in_tensor(r, 1, false, &w)) ||
        (st = ox_in_tensor(r, 2, true, &b)))
        return st;
    if (w->n_dims != 4)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a %zu-d weight; remat convolves in 2-d",
                         w->n_dims);
    if (g <= 0 || g > (1 << 20))
        return ox_node_fail(r, REMAT_ERR_PARSE, "group %lld", (long long)g);
    if ((st = ox_window(r, x, w->dims[2], w->dims[3], &at)))
        return st;
    if (transposed && !ox_attr_str_is(r, "auto_pad", "NOTSET", "NOTSET") &&
        !ox_attr_str_is(r, "auto_pad", "VALID", "NOTSET"))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "auto_pad SAME on a transposed convolution; "
                         "give pads");
    at.groups = (int32_t)g;
    at.out_channels = transposed ? w->dims[1] * g : w->dims[0];
    at.bias = b != NULL;
    if (transposed) {
        if ((st = ox_attr_ints(r, "output_padding", op, 2, &given)))
            return st;
        if (ox_attr(r, "output_shape"))
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "output_shape; give pads and "
                             "output_padding");
        at.out_pad_h = (int32_t)op[0];
        at.out_pad_w = (int32_t)op[1];
    }
    if ((st = ox_emit(r, transposed ? REMAT_OP_CONV_TRANSPOSE2D : REMAT_OP_CONV2D, &x, 1, &at,
                   &y)))
        return st;
    if ((st = ox_keep_weight(r, w, "weight", ox_param_numel(r, 0))))
        return st;
    return ox_keep_weight(r, b, "bias", ox_param_numel(r, 1));
}

static remat_status op_batch_norm(struct rd *r)
{
    const Onnx__TensorProto *t[4];
    remat_attrs at = {0};
    int64_t xs[4];
    int32_t x;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)))
        return st;
    /* remat trains with batch statistics: an inference-mode batch norm (training_mode 0
     * from opset 14, no running-statistics outputs before) would compute something else */
    if (r->opset >= 14 ? ox_attr_i(r, "training_mode", 0) == 0
                       : r->node->n_output < 3 || !r->node->output[1] || !*r->node->output[1])
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "an inference-mode BatchNormalization; "
                         "export in training mode (torch.onnx.export(..., training="
                         "torch.onnx.TrainingMode.TRAINING))");
    for (int i = 0; i < 4; i++)
        if ((st = ox_in_tensor(r, (size_t)i + 1, false, &t[i])))
            return st;
    if (ox_shape_of(r, x, xs) < 2)
        return ox_node_fail(r, REMAT_ERR_SHAPE, "needs a 2-d or 4-d input");
    at.eps = ox_attr_f(r, "epsilon", 1e-5f);
    /* ONNX: running = running * momentum + batch * (1 - momentum); remat's is the other
     * weight (PyTorch's): running = (1 - m) running + m batch. */
    at.momentum = 1.0f - ox_attr_f(r, "momentum", 0.9f);
    if (at.momentum <= 0 || at.momentum > 1)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "momentum %g leaves the running statistics "
                         "unchanged or out of [0, 1)", 1.0 - (double)at.momentum);
    if ((st = ox_emit(r, REMAT_OP_BATCH_NORM, &x, 1, &at, NULL)) ||
        (st = ox_keep_weight(r, t[0], "gamma", ox_param_numel(r, 0))) ||
        (st = ox_keep_weight(r, t[1], "beta", ox_param_numel(r, 1))) ||
        (st = ox_keep_weight(r, t[2], "running_mean", ox_param_numel(r, -1))) ||
        (st = ox_keep_weight(r, t[3], "running_var", ox_param_numel(r, -1))))
        return st;
    return ox_dead_outputs(r, 1, "a running statistic that batch norm updates in place");
}

static remat_status op_unary(struct rd *r, remat_op op, const remat_attrs *at)
{
    int32_t x;
    remat_status st = ox_in_act(r, 0, &x);

    return st ? st : ox_emit(r, op, &x, 1, at, NULL);
}

/* Makes the node's output the same value as its input (Identity, Dropout off, zero Pad). */
static remat_status alias(struct rd *r)
{
    int32_t x;
    remat_status st = ox_in_act(r, 0, &x);

    return st ? st : ox_define(r, r->node->output[0], (struct ent){.kind = E_ACT, .value = x});
}

static remat_status op_pool(struct rd *r, bool max)
{
    remat_attrs at = {0};
    int32_t x;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)))
        return st;
    if (!ox_attr(r, "kernel_shape"))
        return ox_node_fail(r, REMAT_ERR_PARSE, "kernel_shape is required");
    if ((st = ox_window(r, x, 1, 1, &at)))
        return st;
    if (at.dh != 1 || at.dw != 1)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "dilated pooling");
    at.dh = at.dw = 0;
    at.ceil_mode = ox_attr_i(r, "ceil_mode", 0) != 0;
    if (max) {
        if (r->node->n_output > 1 && r->node->output[1] && *r->node->output[1])
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "the Indices output");
        if (ox_attr_i(r, "storage_order", 0) != 0)
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "storage_order 1");
    } else {
        at.count_include_pad = ox_attr_i(r, "count_include_pad", 0) != 0;
    }
    return ox_emit(r, max ? REMAT_OP_MAX_POOL : REMAT_OP_AVG_POOL, &x, 1, &at, NULL);
}

static remat_status op_nary(struct rd *r, remat_op op)
{
    int32_t ins[64];
    int64_t s0[4], s1[4];
    size_t n = r->node->n_input;
    remat_status st;

    if (n < 1 || n > 64)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "%zu inputs (1 to 64)", n);
    for (size_t i = 0; i < n; i++)
        if ((st = ox_in_act(r, i, &ins[i])))
            return st;
    if (op == REMAT_OP_CONCAT) {
        int64_t axis = ox_attr_i(r, "axis", 1), nd = ox_shape_of(r, ins[0], s0);

        if (axis != 1 && axis != 1 - nd)
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "concatenation on axis %lld; remat "
                             "concatenates channels (axis 1)", (long long)axis);
    } else {
        for (size_t i = 1; i < n; i++) {
            int nd0 = (int)ox_shape_of(r, ins[0], s0), nd1 = (int)ox_shape_of(r, ins[i], s1);

            if (nd0 != nd1 || memcmp(s0, s1, sizeof(int64_t) * (size_t)nd0))
                return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "inputs of different shapes "
                                 "(broadcasting)");
        }
    }
    return ox_emit(r, op, ins, (int)n, NULL, NULL);
}

static remat_status op_flatten(struct rd *r)
{
    int64_t axis = ox_attr_i(r, "axis", 1);

    if (axis != 1)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "axis %lld; remat flattens from axis 1",
                         (long long)axis);
    return op_unary(r, REMAT_OP_FLATTEN, NULL);
}

static remat_status op_reshape(struct rd *r)
{
    const Onnx__TensorProto *t;
    remat_attrs at = {0};
    int64_t v[4], xs[4];
    int n, nd;
    int32_t x;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)) || (st = ox_in_tensor(r, 1, false, &t)) ||
        (st = ox_tensor_ints(r, t, v, 4, &n)))
        return st;
    nd = (int)ox_shape_of(r, x, xs);
    at.ndim = n;
    for (int i = 0; i < n; i++) {
        if (v[i] == 0 && !ox_attr_i(r, "allowzero", 0) && i < nd)
            v[i] = xs[i]; /* 0 copies the input's dimension */
        else if (i == 0 && v[i] == r->batch_file && r->batch != r->batch_file)
            v[i] = r->batch; /* the exported batch, replaced */
        at.shape[i] = v[i];
    }
    return ox_emit(r, REMAT_OP_RESHAPE, &x, 1, &at, NULL);
}

static remat_status op_gemm(struct rd *r, bool matmul)
{
    const Onnx__TensorProto *w, *b = NULL;
    remat_attrs at = {0};
    int64_t xs[4];
    int32_t x;
    bool trans_b = matmul ? false : ox_attr_i(r, "transB", 0) != 0;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)) || (st = ox_in_tensor(r, 1, false, &w)) ||
        (!matmul && (st = ox_in_tensor(r, 2, true, &b))))
        return st;
    if (!matmul && (ox_attr_f(r, "alpha", 1) != 1 || ox_attr_f(r, "beta", 1) != 1 ||
                    ox_attr_i(r, "transA", 0)))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "alpha, beta other than 1 or transA");
    if (w->n_dims != 2 || ox_shape_of(r, x, xs) != 2)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat's linear layer takes a 2-d input "
                         "and a 2-d weight");
    at.out_channels = trans_b ? w->dims[0] : w->dims[1];
    at.bias = b != NULL;
    if (b && ox_tensor_numel(b) != at.out_channels)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a bias of %lld values for %lld outputs "
                         "(broadcasting)", (long long)ox_tensor_numel(b),
                         (long long)at.out_channels);
    if (ox_linear_splits(r, ox_out_name(r, 0), x, w, trans_b, b)) /* read in parts */
        return ox_define(r, ox_out_name(r, 0), (struct ent){.kind = E_PEND, .pk = P_LINEAR,
                                                            .value = x, .t = w, .b = b,
                                                            .trans = trans_b});
    if ((st = ox_emit(r, REMAT_OP_LINEAR, &x, 1, &at, NULL)))
        return st;
    if (!trans_b) { /* the file's (in, out) weight, transposed to remat's (out, in) */
        int64_t in = w->dims[0], out = w->dims[1], n = 0;
        float *p = NULL, *q;

        if ((st = ox_tensor_floats(r, w, &p, &n)))
            return st;
        q = core_alloc(r->a, sizeof(float) * (size_t)(n ? n : 1));
        if (!q) {
            core_free(r->a, p, sizeof(float) * (size_t)(n ? n : 1));
            return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
        }
        for (int64_t i = 0; i < in; i++)
            for (int64_t o = 0; o < out; o++)
                q[o * in + i] = p[i * out + o];
        memcpy(p, q, sizeof(float) * (size_t)n);
        core_free(r->a, q, sizeof(float) * (size_t)(n ? n : 1));
        {
            Onnx__TensorProto tt = *w;

            tt.has_raw_data = 1;
            tt.raw_data.data = (uint8_t *)p;
            tt.raw_data.len = (size_t)n * 4;
            tt.n_float_data = 0;
            st = ox_keep_weight(r, &tt, "weight", ox_param_numel(r, 0));
        }
        core_free(r->a, p, sizeof(float) * (size_t)(n ? n : 1));
        if (st)
            return st;
    } else if ((st = ox_keep_weight(r, w, "weight", ox_param_numel(r, 0)))) {
        return st;
    }
    return ox_keep_weight(r, b, "bias", ox_param_numel(r, 1));
}

static remat_status op_dropout(struct rd *r)
{
    const Onnx__TensorProto *t;
    remat_attrs at = {0};
    float p = ox_attr_f(r, "ratio", 0.5f);
    /* opset 11: training when the mask is asked for (as PyTorch exports it) */
    bool training = r->node->n_output > 1 && r->node->output[1] && *r->node->output[1];
    remat_status st;

    if (r->opset >= 12) { /* ratio and training_mode are inputs, training off by default */
        p = 0.5f;
        training = false;
        if ((st = ox_in_tensor(r, 1, true, &t)) || (t && (st = ox_tensor_scalar(r, t, &p))) ||
            (st = ox_in_tensor(r, 2, true, &t)) || (t && (st = ox_tensor_bool(r, t, &training))))
            return st;
    }
    if ((st = ox_dead_outputs(r, 1, "dropout's mask")))
        return st;
    if (p < 0 || p >= 1)
        return ox_node_fail(r, REMAT_ERR_PARSE, "ratio %g is not in [0, 1)", (double)p);
    if (p == 0 || !training)
        return alias(r); /* inference mode: the identity */
    at.p = p;
    return op_unary(r, REMAT_OP_DROPOUT, &at);
}

static remat_status op_clip(struct rd *r)
{
    const Onnx__TensorProto *t;
    float lo = -3.4e38f, hi = 3.4e38f;
    remat_status st;

    if (r->opset >= 11) {
        if ((st = ox_in_tensor(r, 1, true, &t)) || (t && (st = ox_tensor_scalar(r, t, &lo))) ||
            (st = ox_in_tensor(r, 2, true, &t)) || (t && (st = ox_tensor_scalar(r, t, &hi))))
            return st;
    }
    if (lo == 0 && hi >= 3.4e38f)
        return op_unary(r, REMAT_OP_RELU, NULL);
    if (!(lo < hi))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "Clip to [%g, %g]: remat clips to a "
                         "non-empty range", (double)lo, (double)hi);
    return op_unary(r, REMAT_OP_CLIP, &(remat_attrs){.clip_min = lo, .clip_max = hi});
}

static remat_status op_mul(struct rd *r)
{
    int32_t ins[2], t;
    int64_t s0[4], s1[4];
    remat_status st;

    if (r->node->n_input != 2)
        return ox_node_fail(r, REMAT_ERR_PARSE, "%zu inputs, 2 expected", r->node->n_input);
    if ((st = ox_in_act(r, 0, &ins[0])) || (st = ox_in_act(r, 1, &ins[1])))
        return st;
    /* the (N, C, 1, 1) factor second */
    if (ox_shape_of(r, ins[0], s0) == 4 && ox_shape_of(r, ins[1], s1) == 4 && s0[2] * s0[3] == 1 &&
        s1[2] * s1[3] > 1) {
        t = ins[0];
        ins[0] = ins[1];
        ins[1] = t;
    }
    return ox_emit(r, REMAT_OP_MUL, ins, 2, NULL, NULL);
}

static remat_status op_softmax(struct rd *r)
{
    int64_t xs[4], axis = ox_attr_i(r, "axis", r->opset >= 13 ? -1 : 1);
    int32_t x;
    int nd;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)))
        return st;
    nd = (int)ox_shape_of(r, x, xs);
    if (axis < 0)
        axis += nd;
    if (axis != 1 || (nd != 2 && nd != 4))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "softmax over axis %lld of a %d-d tensor; "
                         "remat's is over the channels (axis 1) of a 2-d or 4-d one",
                         (long long)ox_attr_i(r, "axis", r->opset >= 13 ? -1 : 1), nd);
    return ox_emit(r, REMAT_OP_SOFTMAX, &x, 1, NULL, NULL);
}

static remat_status op_transpose(struct rd *r)
{
    const Onnx__AttributeProto *a = ox_attr(r, "perm");
    remat_attrs at = {0};
    int64_t xs[4];
    int32_t x;
    int nd;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)))
        return st;
    nd = (int)ox_shape_of(r, x, xs);
    if (a) {
        if (a->n_ints != (size_t)nd)
            return ox_node_fail(r, REMAT_ERR_PARSE, "perm has %zu entries for %d dimensions",
                             a->n_ints, nd);
        for (int i = 0; i < nd; i++) {
            if (a->ints[i] < 0 || a->ints[i] >= nd)
                return ox_node_fail(r, REMAT_ERR_PARSE, "perm entry %lld", (long long)a->ints[i]);
            at.perm[i] = (int32_t)a->ints[i];
        }
    }
    return op_unary(r, REMAT_OP_TRANSPOSE, &at);
}

static remat_status op_pad(struct rd *r)
{
    const Onnx__TensorProto *t, *cv;
    remat_attrs at = {0};
    int64_t p[8];
    float c = 0;
    int n;
    remat_status st;

    if (!ox_attr_str_is(r, "mode", "constant", "constant"))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a mode other than constant");
    if ((st = ox_in_tensor(r, 1, false, &t)) || (st = ox_tensor_ints(r, t, p, 8, &n)) ||
        (st = ox_in_tensor(r, 2, true, &cv)) || (cv && (st = ox_tensor_scalar(r, cv, &c))))
        return st;
    if (n != 8 || p[0] || p[1] || p[4] || p[5])
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "padding other than a 4-d tensor's height "
                         "and width");
    if (c != 0)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a constant value other than 0");
    if (!p[2] && !p[3] && !p[6] && !p[7])
        return alias(r);
    at.pad_t = (int32_t)p[2];
    at.pad_l = (int32_t)p[3];
    at.pad_b = (int32_t)p[6];
    at.pad_r = (int32_t)p[7];
    return op_unary(r, REMAT_OP_PAD, &at);
}

/* Resize (opset 11+) or Upsample: bilinear to a size, as PyTorch's interpolate exports. */
static remat_status op_resize(struct rd *r)
{
    const Onnx__TensorProto *scales = NULL, *sizes = NULL;
    remat_attrs at = {0};
    int64_t xs[4], v[4];
    int32_t x;
    int n;
    remat_status st;

    if ((st = ox_in_act(r, 0, &x)) || ox_shape_of(r, x, xs) != 4)
        return st ? st : ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a resize of a non-4-d tensor");
    if (!ox_attr_str_is(r, "mode", "linear", "nearest"))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a mode other than linear (bilinear)");
    if (ox_attr_str_is(r, "coordinate_transformation_mode", "align_corners", "half_pixel"))
        at.align_corners = true;
    else if (!ox_attr_str_is(r, "coordinate_transformation_mode", "half_pixel", "half_pixel") &&
             !ox_attr_str_is(r, "coordinate_transformation_mode", "pytorch_half_pixel",
                          "half_pixel"))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a coordinate transformation other than "
                         "align_corners, half_pixel or pytorch_half_pixel");
    if ((st = ox_in_tensor(r, strcmp(r->node->op_type, "Upsample") ? 2 : 1, true, &scales)) ||
        (strcmp(r->node->op_type, "Upsample") && (st = ox_in_tensor(r, 3, true, &sizes))))
        return st;
    if (sizes && ox_tensor_numel(sizes) > 0) {
        if ((st = ox_tensor_ints(r, sizes, v, 4, &n)))
            return st;
        if (n != 4)
            return ox_node_fail(r, REMAT_ERR_PARSE, "sizes needs 4 values");
        at.out_h = v[2];
        at.out_w = v[3];
    } else if (scales && ox_tensor_numel(scales) == 4) {
        float *s = NULL;
        int64_t k = 0;

        double h, w;

        if ((st = ox_tensor_floats(r, scales, &s, &k)))
            return st;
        h = (double)xs[2] * s[2];
        w = (double)xs[3] * s[3];
        core_free(r->a, s, sizeof(float) * 4);
        if (!(h >= 1 && h <= 1 << 20 && w >= 1 && w <= 1 << 20))
            return ox_node_fail(r, REMAT_ERR_PARSE, "scales give a %gx%g output", h, w);
        at.out_h = (int64_t)h;
        at.out_w = (int64_t)w;
        /* ONNX maps coordinates with 1 / scale, remat (as PyTorch with sizes) with the
         * ratio of the sizes: the same only when the scale gives a whole size */
        if ((double)at.out_h != h || (double)at.out_w != w)
            return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "scales that do not give a whole "
                                "output size; give sizes");
    } else {
        return ox_node_fail(r, REMAT_ERR_PARSE, "neither sizes nor 4 scales");
    }
    if (at.out_h < xs[2] || at.out_w < xs[3])
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "downsampling (%lldx%lld to %lldx%lld); "
                         "remat's bilinear resize upsamples", (long long)xs[2], (long long)xs[3],
                         (long long)at.out_h, (long long)at.out_w);
    return ox_emit(r, REMAT_OP_UPSAMPLE_BILINEAR, &x, 1, &at, NULL);
}

static remat_status op_constant(struct rd *r)
{
    const Onnx__AttributeProto *a = ox_attr(r, "value");

    if (!a || !a->t)
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "a constant other than a tensor 'value'");
    return ox_define(r, r->node->output[0], (struct ent){.kind = E_TENSOR, .t = a->t});
}

/* The ONNX op types remat reads, each with its reader and the reader's argument: one
 * table for the reading and for the check of a whole model (ox_reads). */
typedef remat_status (*ox_fn)(struct rd *r, int arg);

static remat_status rd_conv(struct rd *r, int transposed) { return op_conv(r, transposed); }
static remat_status rd_bn(struct rd *r, int arg) { return op_batch_norm(r); }
static remat_status rd_unary(struct rd *r, int op) { return op_unary(r, (remat_op)op, NULL); }
static remat_status rd_clip(struct rd *r, int arg) { return op_clip(r); }
static remat_status rd_pool(struct rd *r, int max) { return op_pool(r, max); }
static remat_status rd_nary(struct rd *r, int op) { return op_nary(r, (remat_op)op); }
static remat_status rd_flatten(struct rd *r, int arg) { return op_flatten(r); }
static remat_status rd_reshape(struct rd *r, int arg) { return op_reshape(r); }
static remat_status rd_gemm(struct rd *r, int matmul) { return op_gemm(r, matmul); }
static remat_status rd_dropout(struct rd *r, int arg) { return op_dropout(r); }
static remat_status rd_constant(struct rd *r, int arg) { return op_constant(r); }
static remat_status rd_alias(struct rd *r, int arg) { return alias(r); }
static remat_status rd_pad(struct rd *r, int arg) { return op_pad(r); }
static remat_status rd_mul(struct rd *r, int arg) { return op_mul(r); }
static remat_status rd_softmax(struct rd *r, int arg) { return op_softmax(r); }
static remat_status rd_transpose(struct rd *r, int arg) { return op_transpose(r); }
static remat_status rd_resize(struct rd *r, int arg) { return op_resize(r); }

static remat_status rd_leaky(struct rd *r, int arg)
{
    return op_unary(r, REMAT_OP_LEAKY_RELU, &(remat_attrs){.alpha = ox_attr_f(r, "alpha", 0.01f)});
}

static const struct ox_op {
    const char *type;
    ox_fn fn;
    int arg;
} ox_ops[] = {
    {"Conv", rd_conv, 0},
    {"ConvTranspose", rd_conv, 1},
    {"BatchNormalization", rd_bn, 0},
    {"Relu", rd_unary, REMAT_OP_RELU},
    {"Clip", rd_clip, 0},
    {"MaxPool", rd_pool, 1},
    {"AveragePool", rd_pool, 0},
    {"GlobalAveragePool", rd_unary, REMAT_OP_GLOBAL_AVG_POOL},
    {"Add", rd_nary, REMAT_OP_ADD},
    {"Sum", rd_nary, REMAT_OP_ADD},
    {"Concat", rd_nary, REMAT_OP_CONCAT},
    {"Flatten", rd_flatten, 0},
    {"Reshape", rd_reshape, 0},
    {"Gemm", rd_gemm, 0},
    {"MatMul", rd_gemm, 1},
    {"Dropout", rd_dropout, 0},
    {"Constant", rd_constant, 0},
    {"Identity", rd_alias, 0},
    {"Pad", rd_pad, 0},
    {"LeakyRelu", rd_leaky, 0},
    {"Sigmoid", rd_unary, REMAT_OP_SIGMOID},
    {"Mul", rd_mul, 0},
    {"Softmax", rd_softmax, 0},
    {"Transpose", rd_transpose, 0},
    {"Resize", rd_resize, 0},
    {"Upsample", rd_resize, 0},
    {"LSTM", ox_rnn_read, 0},
    {"GRU", ox_rnn_read, 1},
};

static const struct ox_op *find_op(const char *type)
{
    for (size_t i = 0; i < REMAT_ARRAY_LEN(ox_ops); i++)
        if (!strcmp(ox_ops[i].type, type))
            return &ox_ops[i];
    return NULL;
}

bool ox_reads(const char *domain, const char *type)
{
    return (!domain || !*domain || !strcmp(domain, "ai.onnx")) && type &&
           (find_op(type) || ox_tf_reads(type) || ox_act_reads(type));
}

remat_status ox_read_node(struct rd *r)
{
    const char *t = r->node->op_type ? r->node->op_type : "";
    const struct ox_op *op;
    bool done = false;
    remat_status st;

    if (r->node->domain && *r->node->domain && strcmp(r->node->domain, "ai.onnx"))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "domain '%s'", r->node->domain);
    if ((st = ox_rnn_node(r, &done)) || done) /* LSTM and GRU: any output may be absent */
        return st;
    if (r->node->n_output < 1 || !r->node->output[0] || !*r->node->output[0])
        return ox_node_fail(r, REMAT_ERR_PARSE, "no output");
    if ((st = ox_vis_node(r, &done)) || done || (st = ox_fold(r, &done)) || done ||
        (st = ox_act_node(r, &done)) || done || (st = ox_tf_node(r, &done)) || done)
        return st;
    if (!(op = find_op(t)))
        return ox_node_fail(r, REMAT_ERR_UNSUPPORTED, "remat has no %s (docs/onnx.md lists the "
                            "ops it reads)", t);
    return op->fn(r, op->arg);
}

/* Every op type of the graph that remat does not read, at once: one refusal listing
 * each type with its count and its first node, so a user sees the whole gap. */
void ox_coverage(const Onnx__GraphProto *gp, struct onnx_cover *c)
{
    c->n_nodes = gp->n_node;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        const char *ty = nd->op_type ? nd->op_type : "", *dm = nd->domain ? nd->domain : "";
        size_t k = 0;

        if (ox_reads(nd->domain, nd->op_type))
            continue;
        c->gap_nodes++;
        while (k < c->n_gaps && !(!strncmp(c->gap[k].type, ty, sizeof c->gap[k].type - 1) &&
                                  !strncmp(c->gap[k].domain, dm, sizeof c->gap[k].domain - 1)))
            k++;
        if (k < c->n_gaps) {
            c->gap[k].count++;
        } else if (c->n_gaps < ONNX_COVER_MAX) {
            struct onnx_gap *g = &c->gap[c->n_gaps++];

            snprintf(g->type, sizeof g->type, "%s", ty);
            snprintf(g->domain, sizeof g->domain, "%s", dm);
            snprintf(g->first_name, sizeof g->first_name, "%s", nd->name ? nd->name : "");
            g->count = 1;
            g->first = i;
        } else {
            c->more++;
        }
    }
}

remat_status ox_check_coverage(const struct rd *r, const Onnx__GraphProto *gp)
{
    struct onnx_cover *c = core_calloc(r->a, 1, sizeof *c);
    size_t len = 0, n;
    char list[3072] = "";
    remat_status st;

    if (!c)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory", r->label);
    ox_coverage(gp, c);
    n = c->n_gaps + c->more;
    for (size_t k = 0; k < c->n_gaps && len < sizeof list - 1; k++) {
        const struct onnx_gap *g = &c->gap[k];
        int w = snprintf(list + len, sizeof list - len, "%s%s%s%s x%zu (first: node %zu '%.40s')",
                         k ? ", " : "", g->domain, *g->domain ? ":" : "", g->type, g->count,
                         g->first, g->first_name);

        len = w > 0 && (size_t)w < sizeof list - len ? len + (size_t)w : sizeof list - 1;
    }
    st = !n ? REMAT_OK
            : REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "%s: %zu op type%s remat does not read at opset "
                         "%d, in %zu node%s (docs/onnx.md lists those it reads): %s%s", r->label,
                         n, n == 1 ? "" : "s", r->opset, c->gap_nodes,
                         c->gap_nodes == 1 ? "" : "s", list, c->more ? " and more" : "");
    core_free(r->a, c, sizeof *c);
    return st;
}
