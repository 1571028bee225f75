#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "backends/vulkan/vk-device.h"

namespace minfer::vulkan {

std::string_view embedded_file(std::string_view name);  // shaders-assets.cpp (generated)

Expected<Pipeline*> VulkanBackend::Impl::pipeline(Kernel k, int spec) {
  if (auto it = pipelines.find({k, spec}); it != pipelines.end()) return &it->second;
  Pipeline p;
  auto built = build_pipeline(k, spec, p);
  if (!built) {  // nothing half-made is kept: the next call tries again from scratch
    vkDestroyPipelineLayout(device, p.layout, nullptr);
    vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
    return built.error();
  }
  return &(pipelines[{k, spec}] = p);
}

Status VulkanBackend::Impl::build_pipeline(Kernel k, int spec, Pipeline& p) {
  // The exact variant (`<name>_exact.spv`: fused multiply-adds and the CPU's double sums in
  // double precision) where the device's own fma() is not fused and it has doubles.
  std::string shader = kKernelNames[static_cast<size_t>(k)];
  if (exact && !embedded_file(shader + "_exact.spv").empty()) shader += "_exact";
  const std::string_view spv = embedded_file(shader + ".spv");
  if (spv.empty()) return make_error("vulkan: no shader '{}' in this build", shader);
  VkDescriptorSetLayoutBinding b[kBindings]{};
  for (uint32_t i = 0; i < kBindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{};
  dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  dl.bindingCount = kBindings;
  dl.pBindings = b;
  if (Status s = check(vkCreateDescriptorSetLayout(device, &dl, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout"); !s)
    return s;
  VkPushConstantRange pc{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushWords * 4};
  VkPipelineLayoutCreateInfo pl{};
  pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p.set_layout;
  pl.pushConstantRangeCount = 1;
  pl.pPushConstantRanges = &pc;
  if (Status s = check(vkCreatePipelineLayout(device, &pl, nullptr, &p.layout), "vkCreatePipelineLayout"); !s)
    return s;
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = spv.size();
  std::vector<uint32_t> code(spv.size() / 4);
  std::memcpy(code.data(), spv.data(), code.size() * 4);
  mi.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  if (Status s = check(vkCreateShaderModule(device, &mi, nullptr, &module), "vkCreateShaderModule"); !s)
    return s;
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  const uint32_t spec_value = static_cast<uint32_t>(spec);
  const VkSpecializationMapEntry entry{0, 0, 4};
  const VkSpecializationInfo si{1, &entry, 4, &spec_value};
  if (spec >= 0) ci.stage.pSpecializationInfo = &si;
  ci.layout = p.layout;
  const VkResult r = vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline);
  vkDestroyShaderModule(device, module, nullptr);
  return check(r, "vkCreateComputePipelines");
}

}  // namespace minfer::vulkan
