#include "api/gguf-json.h"

#include <fmt/format.h>

#include <string>
#include <type_traits>
#include <variant>

namespace minfer::api {

nlohmann::ordered_json gguf_value_json(const GgufValue& v) {
  using json = nlohmann::ordered_json;
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, GgufArray>) {
          json a = json::array();
          for (size_t i = 0; i < x.size(); ++i) a.push_back(gguf_value_json(x.at(i)));
          return a;
        } else if constexpr (std::is_same_v<T, float>) {
          return json(std::stod(fmt::format("{}", x)));
        } else {
          return json(x);
        }
      },
      v.storage());
}

}  // namespace minfer::api
