// The chat page at / (webui/: index.html, chat.js, chat.css, embedded at build time; --no-webui
// turns it off). Its files need no API key: the page asks for one when the API answers 401.
#include "server/server-state.h"

namespace minfer::server {

std::string_view embedded_file(std::string_view name);  // webui-assets.cpp (generated)

void add_webui_routes(httplib::Server& http, ServerState&) {
  auto file = [](const char* name, const char* type) {
    return [name, type](const httplib::Request&, httplib::Response& res) {
      const std::string_view data = embedded_file(name);
      res.set_header("Cache-Control", "no-cache");
      res.set_content(std::string(data), type);
    };
  };
  http.Get("/", file("index.html", "text/html; charset=utf-8"));
  http.Get("/index.html", file("index.html", "text/html; charset=utf-8"));
  http.Get("/chat.js", file("chat.js", "text/javascript; charset=utf-8"));
  http.Get("/chat.css", file("chat.css", "text/css; charset=utf-8"));
}

}  // namespace minfer::server
