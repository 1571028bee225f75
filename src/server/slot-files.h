// Slot files (llama-server's POST /slots/ID?action=save|restore|erase; docs/server-api.md#slots):
// a slot's cached tokens and KV rows written to, or read from, a file under --slot-save-path,
// in the runtime's KV file format (runtime/kv-file.h, the one chat sessions use), so a
// conversation's prefix survives a restart or moves to another slot without a prefill.
//
//   auto r = slot_action(*engine, identity, "/var/cache/slots", 1, "save", {{"filename", "a.bin"}});
//   if (auto* e = std::get_if<ApiError>(&r)) return reply(*e);
//   reply(std::get<json>(r));  // {"id_slot", "filename", "n_saved", "n_written", "timings"}
//
// Each action waits (at most `wait`) for the slot to be idle and runs between engine steps.
// A filename is one plain name inside the folder (no separators, not hidden, no "..").
#pragma once

#include <chrono>
#include <string>
#include <variant>

#include "runtime/kv-file.h"
#include "server/api.h"
#include "server/engine.h"

namespace minfer::server {

// action "save" | "restore" | "erase"; dir: --slot-save-path ("" : save and restore answer 501).
std::variant<json, ApiError> slot_action(Engine& engine, const ModelIdentity& id, const std::string& dir, int slot,
                                         const std::string& action, const json& body,
                                         std::chrono::milliseconds wait = std::chrono::seconds(60));

// Whether name is a plain file name: 1-255 bytes, UTF-8 without control characters, no '/' or
// '\\', not "." or "..", not starting with '.'.
bool valid_slot_filename(const std::string& name);

}  // namespace minfer::server
