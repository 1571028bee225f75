// The built-in templates under llama.cpp's legacy names (llama3, llama2, mistral, phi3, zephyr,
// vicuna, command-r, granite) beside ChatML and Gemma (chat.h): find_builtin_template finds them
// all.
//
//   for (const BuiltinTemplate& b : legacy_builtin_templates()) ...
#pragma once

#include <span>

#include "template/chat.h"

namespace minfer::jinja {

std::span<const BuiltinTemplate> legacy_builtin_templates();

}  // namespace minfer::jinja
