// URL pieces the downloader needs: an origin to decide whether a redirect leaves the host (then
// the token stays behind), and RFC 3986 resolution of a Location header.
//
//   Origin a = url_origin("https://huggingface.co/x");      // {https, huggingface.co, 443}
//   std::string u = url_resolve("https://h/a/b", "/c?d");    // "https://h/c?d"
//   std::string p = url_escape_path("dir/a b.gguf");         // "dir/a%20b.gguf"
#pragma once

#include <string>
#include <string_view>

namespace minfer::hub {

struct Origin {
  std::string scheme;  // lower case
  std::string host;    // lower case
  int port = 0;        // the scheme's default when not written
  bool operator==(const Origin&) const = default;
};

Origin url_origin(std::string_view url);

// Resolves `location` (absolute, scheme-relative, absolute-path or relative) against `base`.
std::string url_resolve(std::string_view base, std::string_view location);

// True for http:// and https:// URLs, the only ones the downloaders follow.
bool url_is_http(std::string_view url);

// Percent-encodes everything but unreserved characters and '/'.
std::string url_escape_path(std::string_view path);
// Percent-encodes everything but unreserved characters (a path segment or query value).
std::string url_escape(std::string_view s);

}  // namespace minfer::hub
