#include "http/errors.h"

#include <fmt/format.h>

namespace minfer::http {

json error_json(const Error& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  if (e.extra.is_object())
    for (auto it = e.extra.begin(); it != e.extra.end(); ++it) err[it.key()] = it.value();
  return {{"error", err}};
}

void reply_error(httplib::Response& res, const Error& e) {
  res.status = e.status;
  res.set_content(error_json(e).dump(-1, ' ', false, json::error_handler_t::replace), "application/json; charset=utf-8");
}

void install_error_handlers(httplib::Server& server, size_t max_body, ErrorReply reply) {
  server.set_error_handler([max_body, reply](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    Error e;
    e.status = res.status;
    if (res.status == 404) {
      e.message = fmt::format("no route for {} {}", req.method, req.path);
      e.type = "not_found_error";
      e.code = "not_found";
    } else if (res.status == 413) {
      e.message = fmt::format("the request body is larger than the limit of {} bytes", max_body);
      e.code = "request_too_large";
    } else {
      e.message = fmt::format("HTTP {}", res.status);
      if (res.status >= 500) e.type = "server_error";
    }
    reply(res, e);
  });
  server.set_exception_handler([reply](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    reply(res, {500, what, "server_error", "", ""});
  });
}

}  // namespace minfer::http
