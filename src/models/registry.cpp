// The architecture registry: one line per architecture file.
#include "models/arch.h"

namespace minfer {

extern const ArchSpec kLlamaArch;  // llama.cpp
extern const ArchSpec kQwen2Arch;  // qwen2.cpp
extern const ArchSpec kQwen3Arch;  // qwen3.cpp
extern const ArchSpec kGemma2Arch;  // gemma2.cpp
extern const ArchSpec kGemma3Arch;  // gemma3.cpp
extern const ArchSpec kPhi3Arch;  // phi3.cpp
extern const ArchSpec kQwen3MoeArch;  // qwen3.cpp

namespace {
const ArchSpec* const kArchs[] = {
    &kLlamaArch,
    &kQwen2Arch,
    &kQwen3Arch,
    &kGemma2Arch,
    &kGemma3Arch,
    &kPhi3Arch,
    &kQwen3MoeArch,
};
}  // namespace

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec* a : kArchs)
    if (a->name == name) return a;
  return nullptr;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> v;
  for (const ArchSpec* a : kArchs) v.emplace_back(a->name);
  return v;
}

}  // namespace minfer
