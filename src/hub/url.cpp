#include "hub/url.h"

#include <cctype>

namespace minfer::hub {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Splits "scheme://authority/rest" into its three parts; rest keeps its leading '/'.
struct Parts {
  std::string scheme, authority, rest;
};

Parts split(std::string_view url) {
  Parts p;
  const size_t colon = url.find("://");
  if (colon == std::string_view::npos) {
    p.rest = std::string(url);
    return p;
  }
  p.scheme = lower(url.substr(0, colon));
  std::string_view after = url.substr(colon + 3);
  const size_t slash = after.find_first_of("/?#");
  p.authority = std::string(after.substr(0, slash));
  p.rest = slash == std::string_view::npos ? "/" : std::string(after.substr(slash));
  if (!p.rest.empty() && p.rest[0] != '/') p.rest = "/" + p.rest;
  return p;
}

bool unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

std::string escape(std::string_view s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string r;
  for (unsigned char c : s) {
    if (unreserved(c) || (keep_slash && c == '/')) {
      r += static_cast<char>(c);
    } else {
      r += '%';
      r += hex[c >> 4];
      r += hex[c & 15];
    }
  }
  return r;
}

}  // namespace

Origin url_origin(std::string_view url) {
  const Parts p = split(url);
  Origin o;
  o.scheme = p.scheme;
  std::string auth = p.authority;
  if (const size_t at = auth.rfind('@'); at != std::string::npos) auth = auth.substr(at + 1);
  std::string host = auth;
  std::string port;
  if (!auth.empty() && auth[0] == '[') {  // [ipv6]:port
    const size_t close = auth.find(']');
    host = auth.substr(0, close + 1);
    if (close != std::string::npos && close + 1 < auth.size() && auth[close + 1] == ':') port = auth.substr(close + 2);
  } else if (const size_t c = auth.rfind(':'); c != std::string::npos) {
    host = auth.substr(0, c);
    port = auth.substr(c + 1);
  }
  o.host = lower(host);
  o.port = o.scheme == "https" ? 443 : o.scheme == "http" ? 80 : 0;
  if (!port.empty()) {
    int v = 0;
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return o;
      v = v * 10 + (c - '0');
      if (v > 65535) return o;
    }
    o.port = v;
  }
  return o;
}

std::string url_resolve(std::string_view base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) return std::string(location);
  const Parts b = split(base);
  if (location.starts_with("//")) return b.scheme + ":" + std::string(location);
  if (location.starts_with("/")) return b.scheme + "://" + b.authority + std::string(location);
  // Relative: replace the last path segment of the base (its query dropped).
  std::string path = b.rest.substr(0, b.rest.find_first_of("?#"));
  path = path.substr(0, path.rfind('/') + 1);
  return b.scheme + "://" + b.authority + path + std::string(location);
}

bool url_is_http(std::string_view url) {
  const std::string s = url_origin(url).scheme;
  return (s == "http" || s == "https") && !url_origin(url).host.empty();
}

std::string url_escape_path(std::string_view path) { return escape(path, true); }
std::string url_escape(std::string_view s) { return escape(s, false); }

}  // namespace minfer::hub
