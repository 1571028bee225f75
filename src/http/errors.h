// JSON error replies, one shape for every HTTP front end: OpenAI's
// {"error": {"message", "type", "param", "code"}} (more fields in `extra`), and the handlers
// that give httplib's own errors (404 no route, 413 body too large, an exception) that shape.
//
//   http::reply_error(res, {404, "no model 'x'", "not_found_error", "model"});
//   http::install_error_handlers(server, max_body, [](httplib::Response& r, const http::Error& e) {
//     http::reply_error(r, e);               // or another API's shape of the same error
//   });
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace minfer::http {

using json = nlohmann::ordered_json;

struct Error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // invalid_request_error, authentication_error, not_found_error,
                                               // server_error, unavailable_error ...
  std::string param;                           // the offending field ("" -> null)
  std::string code;                            // "" -> null
  json extra = json::object();                 // more fields of the error object (llama-server's n_ctx ...)
};

json error_json(const Error& e);  // {"error": {"message", "type", "param", "code", ...extra}}
void reply_error(httplib::Response& res, const Error& e);  // status + error_json

// How one front end writes an error (its API's shape): used for the errors httplib makes.
using ErrorReply = std::function<void(httplib::Response&, const Error&)>;
// 404 "no route for GET /x" (not_found_error), 413 naming max_body, other statuses "HTTP n";
// an exception escaping a handler is a 500 server_error with its what(). Bodies a handler set
// are kept.
void install_error_handlers(httplib::Server& server, size_t max_body, ErrorReply reply);

}  // namespace minfer::http
