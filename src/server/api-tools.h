// OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` fields (docs/server-api.md), read
// into a toolcall::ToolRequest. Internal to src/server (api.cpp).
//
//   toolcall::ToolRequest req;
//   if (auto e = parse_tool_fields(body, req)) return *e;   // 400 naming the field
//   if (req.tools.empty()) ...                              // no tools in this request
#pragma once

#include <optional>

#include "server/api.h"
#include "toolcall/tools.h"

namespace minfer::server {

std::optional<ApiError> parse_tool_fields(const json& body, toolcall::ToolRequest& out);

}  // namespace minfer::server
