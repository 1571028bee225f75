// Where -ngl puts each node of a model's graph, as llama.cpp places layers: the last n
// repeating layers on the devices, the output layer (final norm, LM head) too when n is past the
// repeating layers, the input layer (token embedding lookup) always on the host. Offloaded
// layers are divided among several devices in order, in equal runs.
//
//   LayerPlacement lp{.n_layer = 30, .n_gpu_layers = 10, .n_devices = 1};
//   lp.device_of("blk.25.attn_q");   // 0: layers 20..29 on device 0
//   lp.device_of("blk.3.attn_q");    // -1: the host
//   lp.device_of("result_output");   // -1: the output needs -ngl 31 (or all)
//   lp.device_of("inp_embd");        // -1 always
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer {

// -ngl's "all": every repeating layer and the output layer.
constexpr int kAllLayers = -1;

// A node's layer from its name: "blk.N." -> N; "inp_..." -> -1 (input); anything else (output
// norm, LM head, results) -> n_layer (the output layer).
int64_t node_layer(std::string_view name, int64_t n_layer);

struct LayerPlacement {
  int64_t n_layer = 0;
  int n_gpu_layers = 0;  // llama.cpp's -ngl: 0 none, kAllLayers all, past n_layer the output too
  int n_devices = 0;
  // The device (0 .. n_devices - 1) that runs the node named `name`, or -1 for the host.
  int device_of(std::string_view name) const;
  int device_of_layer(int64_t il) const;  // il in [-1, n_layer]: -1 input, n_layer output
  // Repeating layers on the devices, and whether the output layer is.
  int64_t n_offloaded() const;
  bool output_offloaded() const;
};

}  // namespace minfer
