// -ngl's layer placement (runtime/placement.h) against llama.cpp's rule: the last N repeating
// layers on the devices, the output layer only when N is past them, the input layer never.
#include "runtime/placement.h"

#include <gtest/gtest.h>

namespace minfer {
namespace {

TEST(Placement, NodeLayersFromTheirNames) {
  EXPECT_EQ(node_layer("blk.0.attn_q", 30), 0);
  EXPECT_EQ(node_layer("blk.29.ffn_down", 30), 29);
  EXPECT_EQ(node_layer("inp_embd", 30), -1);
  EXPECT_EQ(node_layer("output_norm", 30), 30);
  EXPECT_EQ(node_layer("result_output", 30), 30);
  EXPECT_EQ(node_layer("blk.30.x", 30), 30);  // no such layer: not a repeating one
  EXPECT_EQ(node_layer("blk.x.y", 30), 30);
}

TEST(Placement, TheLastLayersAndTheOutputPastThem) {
  const LayerPlacement ten{.n_layer = 30, .n_gpu_layers = 10, .n_devices = 1};
  EXPECT_EQ(ten.device_of("blk.19.attn_q"), -1);
  EXPECT_EQ(ten.device_of("blk.20.attn_q"), 0);
  EXPECT_EQ(ten.device_of("blk.29.l_out"), 0);
  EXPECT_EQ(ten.device_of("result_output"), -1);
  EXPECT_EQ(ten.device_of("inp_embd"), -1);
  EXPECT_EQ(ten.n_offloaded(), 10);
  EXPECT_FALSE(ten.output_offloaded());
  const LayerPlacement thirty{.n_layer = 30, .n_gpu_layers = 30, .n_devices = 1};
  EXPECT_EQ(thirty.device_of("blk.0.attn_q"), 0);
  EXPECT_EQ(thirty.device_of("result_output"), -1);  // llama.cpp: the output needs n_layer + 1
  for (int n : {31, 99, kAllLayers}) {
    const LayerPlacement all{.n_layer = 30, .n_gpu_layers = n, .n_devices = 1};
    EXPECT_EQ(all.device_of("blk.0.attn_q"), 0);
    EXPECT_EQ(all.device_of("result_output"), 0);
    EXPECT_EQ(all.device_of("inp_embd"), -1);
    EXPECT_EQ(all.n_offloaded(), 30);
  }
  const LayerPlacement none{.n_layer = 30, .n_gpu_layers = 0, .n_devices = 1};
  EXPECT_EQ(none.device_of("blk.29.attn_q"), -1);
  const LayerPlacement no_device{.n_layer = 30, .n_gpu_layers = kAllLayers, .n_devices = 0};
  EXPECT_EQ(no_device.device_of("blk.29.attn_q"), -1);
  EXPECT_FALSE(no_device.output_offloaded());
}

TEST(Placement, SeveralDevicesTakeEqualRunsInOrder) {
  const LayerPlacement two{.n_layer = 4, .n_gpu_layers = kAllLayers, .n_devices = 2};  // 4 layers + output
  EXPECT_EQ(two.device_of_layer(0), 0);
  EXPECT_EQ(two.device_of_layer(1), 0);
  EXPECT_EQ(two.device_of_layer(2), 0);
  EXPECT_EQ(two.device_of_layer(3), 1);
  EXPECT_EQ(two.device_of_layer(4), 1);  // the output
  const LayerPlacement half{.n_layer = 8, .n_gpu_layers = 4, .n_devices = 2};
  EXPECT_EQ(half.device_of_layer(3), -1);
  EXPECT_EQ(half.device_of_layer(4), 0);
  EXPECT_EQ(half.device_of_layer(5), 0);
  EXPECT_EQ(half.device_of_layer(6), 1);
  EXPECT_EQ(half.device_of_layer(7), 1);
}

}  // namespace
}  // namespace minfer
