/*
 * mlp.c - a multilayer perceptron on flattened images: input (N, height * width)
 * (28x28 = 784 by default), linear 512 + relu, linear 512 + relu, linear to the classes,
 * all with bias.
 */
#include "models/zoo.h"

#define HIDDEN 512

remat_status zoo_build_mlp(remat_graph *g, const struct zoo_cfg *c, const void *arg)
{
    int64_t shape[2] = {c->batch, 0};
    int32_t x;

    (void)arg;
    if (!core_mul_i64(c->height, c->width, &shape[1]))
        return REMAT_FAIL(REMAT_ERR_ARG, "mlp: %lld x %lld input features overflow",
                          (long long)c->height, (long long)c->width);
    x = remat_graph_input(g, "input", 2, shape);
    x = zoo_linear(g, x, NULL, "fc1", HIDDEN, true);
    x = zoo_relu(g, x, NULL, "relu1");
    x = zoo_linear(g, x, NULL, "fc2", HIDDEN, true);
    x = zoo_relu(g, x, NULL, "relu2");
    x = zoo_linear(g, x, NULL, "fc3", c->classes, true);
    return zoo_class_loss(g, x);
}
