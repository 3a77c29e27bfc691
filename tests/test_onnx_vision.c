/*
 * test_onnx_vision.c - the image models of ONNX import's second round, exported from
 * PyTorch 1.13 / torchvision 0.14 and trained by remat from their weights: MNASNet 0.5
 * (its head's mean over height and width: ReduceMean), ShuffleNetV2 x0.5 (channel
 * shuffles: Reshape to 5-d, Transpose, Reshape; channel splits: Slice), ConvNeXt-Tiny
 * (layer norm over channels between two permutes, linear layers over the last axis of
 * NHWC tensors, erf GELU, layer scale: Mul by a parameter; stochastic depth 0) and
 * ViT-B/16's layers at 32x32 (class token: Concat with an expanded parameter, position
 * embedding: Add of a parameter, nn.MultiheadAttention, the class token picked by
 * Gather) and MobileNetV3-Small (hard swish: HardSigmoid times its input at opset 13,
 * the HardSwish op at 14; hard sigmoid in its squeeze-and-excitation blocks).
 *
 * The method is test_onnx.c's (onnx_grads.h): tools/onnx_reference.py exports each model
 * and computes PyTorch's float64 and float32 gradients for one batch; remat's loss within
 * 1e-4 and every parameter's gradient within 1e-4 (norm-relative, floored at the RMS
 * gradient) of float64 with remat's own ReLU and max-pooling choices pinned, on the ref
 * and cpu backends. ConvNeXt and the ViT have no kinks (GELU), so there plain float64
 * is held to 1e-4.
 *
 * Without PyTorch, torchvision and onnx for /usr/bin/python3 the test reports skipped.
 * Under sanitizers only ShuffleNet runs. REMAT_TEST_MODEL=name runs one model.
 */
#include "onnx_grads.h"

static void test_models(void)
{
    static const struct {
        const char *name;
        int size, batch, opset; /* opset 0: the tool's default */
        bool named_only;        /* run when REMAT_TEST_MODEL names it (time) */
    } models[] = {
        {"shufflenet_v2_x0_5", 112, 2, 0, false},
        {"mnasnet0_5", 128, 2, 0, false},
        {"convnext_tiny", 32, 2, 0, false},
        {"vit_b_16", 32, 2, 0, false},
        /* Hardswish as HardSigmoid times x (opset 13), read as hard_swish: the graph
         * opset 14's HardSwish op gives */
        {"mobilenet_v3_small", 64, 2, 13, false},
        {"mobilenet_v3_small", 64, 2, 14, true},
    };
    const char *only = getenv("REMAT_TEST_MODEL");

    if (!have_torch()) {
        SKIP("no PyTorch, torchvision or onnx for /usr/bin/python3");
        return;
    }
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if ((!QUICK || i == 0) && (only ? !strcmp(only, models[i].name)
                                         : !models[i].named_only)) {
            snprintf(export_opset, sizeof export_opset, models[i].opset ? "--opset %d" : "",
                     models[i].opset);
            check_model(models[i].name, models[i].size, models[i].batch);
        }
}

int main(void)
{
    char cmd[128];

    snprintf(tmp_root, sizeof tmp_root, "/tmp/remat_onnxv_XXXXXX");
    REMAT_ASSERT_TEST(mkdtemp(tmp_root));
    RUN(test_models);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd)) {
    }
    return harness_end();
}
