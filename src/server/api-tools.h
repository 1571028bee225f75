// OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` fields (docs/server-api.md), read
// into a toolcall::ToolRequest. Internal to src/server (request-parse.cpp).
//
//   auto req = parse_tool_fields(body);
//   if (!req) return req.error();                           // 400 naming the field
//   if (req->tools.empty()) ...                             // no tools in this request
#pragma once

#include "server/request.h"
#include "toolcall/tools.h"

namespace minfer::server {

ApiResult<toolcall::ToolRequest> parse_tool_fields(const json& body);

}  // namespace minfer::server
