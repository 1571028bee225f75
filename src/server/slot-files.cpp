// Slot files (slot-files.h).
#include "server/slot-files.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/utf8.h"
#include "runtime/context.h"

namespace minfer::server {

bool valid_slot_filename(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.' || !utf8_valid(name)) return false;
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') return false;
  return true;
}

std::variant<json, ApiError> slot_action(Engine& engine, const ModelIdentity& id, const std::string& dir, int slot,
                                         const std::string& action, const json& body, std::chrono::milliseconds wait) {
  if (action != "save" && action != "restore" && action != "erase")
    return invalid_param("action", fmt::format("action '{}' is not save, restore or erase", action));
  if (slot < 0 || slot >= engine.params().n_slots)
    return invalid_param("id_slot", fmt::format("slot {} does not exist (0 .. {})", slot, engine.params().n_slots - 1));
  const auto t0 = std::chrono::steady_clock::now();
  auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
  auto failed = [](const Status& st) {
    ApiError e;
    e.status = 400;
    e.message = st.error().message;
    return e;
  };
  if (action == "erase") {
    size_t n = 0;
    Status st = engine.edit_idle_slot(slot, [&](Context& ctx, int seq, std::vector<int32_t>& cached) -> Status {
      n = cached.size();
      cached.clear();
      ctx.seq_clear(seq);
      return Status::ok();
    }, wait);
    if (!st) return failed(st);
    return json{{"id_slot", slot}, {"n_erased", n}};
  }
  if (dir.empty()) {
    ApiError e;
    e.status = 501;
    e.type = "not_supported_error";
    e.message = "This server does not support slots action. Start it with `--slot-save-path`";
    return e;
  }
  const json* f = body.is_object() && body.contains("filename") ? &body["filename"] : nullptr;
  if (!f || !f->is_string() || !valid_slot_filename(f->get<std::string>()))
    return invalid_param("filename", "Invalid filename: a plain file name inside --slot-save-path is required");
  const std::string name = f->get<std::string>();
  const std::string path = (std::filesystem::path(dir) / name).string();
  // Errors name the file, not the server's folder.
  auto named = [&](const Status& st, int status) {
    ApiError e = failed(st);
    e.status = status;
    if (status >= 500) e.type = "server_error";
    for (size_t at; (at = e.message.find(path)) != std::string::npos;) e.message.replace(at, path.size(), name);
    return e;
  };
  if (action == "save") {
    // The rows are copied out on the engine thread (between steps); the file is written here.
    std::vector<int32_t> tokens;
    std::vector<uint8_t> kv;
    Status st = engine.edit_idle_slot(slot, [&tokens, &kv, slot](Context& ctx, int seq, std::vector<int32_t>& cached) -> Status {
      if (cached.size() != static_cast<size_t>(ctx.seq_len(seq)))
        return make_error("slot {}: its cache holds {} positions but {} tokens are known", slot, ctx.seq_len(seq), cached.size());
      auto rows = ctx.kv_export(seq);
      if (!rows) return rows.error();
      tokens = cached;
      kv = std::move(*rows);
      return Status::ok();
    }, wait);
    if (!st) return failed(st);
    if (Status w = write_kv_file(path, id, engine.context(), tokens, "", kv); !w) return named(w, 500);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    return json{{"id_slot", slot}, {"filename", name}, {"n_saved", tokens.size()}, {"n_written", ec ? 0 : bytes},
                {"timings", {{"save_ms", ms()}}}};
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    ApiError e = invalid_param("filename", fmt::format("no slot file '{}' in --slot-save-path", name));
    e.status = 404;
    e.type = "not_found_error";
    return e;
  }
  // Read and checked here; only the import runs on the engine thread.
  auto kv = read_kv_file(path, id, engine.context());
  if (!kv) return named(kv.error(), 400);
  const size_t n_tokens = kv->tokens.size();
  Status st = engine.edit_idle_slot(slot, [&kv](Context& ctx, int seq, std::vector<int32_t>& cached) -> Status {
    MINFER_TRY(ctx.kv_import(seq, kv->kv, static_cast<int>(kv->tokens.size())));
    cached = std::move(kv->tokens);
    return Status::ok();
  }, wait);
  if (!st) return failed(st);
  const auto bytes = std::filesystem::file_size(path, ec);
  return json{{"id_slot", slot}, {"filename", name}, {"n_restored", n_tokens}, {"n_read", ec ? 0 : bytes},
              {"timings", {{"restore_ms", ms()}}}};
}

}  // namespace minfer::server
