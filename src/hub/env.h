// Environment and retry policy shared by the hub's stores and clients.
//
//   std::string d = env_var("HF_HOME");            // "" when unset
//   for_each_try([&](int attempt) { ... return done; });
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::hub {

std::string env_var(const char* name);  // "" when unset
std::string home_dir();                 // $HOME, "." without one
bool env_truthy(const char* name);      // 1 / ON / YES / TRUE, any case
std::string read_trimmed(const std::string& path);  // file text without trailing space; "" if unreadable

// Backoff before try k+1: MINFER_HTTP_RETRY_MS (default 1000) * 2^k, at most 30 s.
int retry_base_ms();
// Sleeps `ms` unless a cancel arrives (http_cancel_all), in 50 ms steps.
void backoff_sleep(int ms);

// Runs `attempt` until it returns true (done, or an error not worth retrying) or `max_tries`
// tries were made, sleeping with exponential backoff between tries. `why` names the failure
// for the "retrying in N s" line on stderr.
void with_retries(int max_tries, const std::function<bool(std::string* why)>& attempt);

// Entries of a folder / every file below it (links to files included), never throwing: an
// unreadable or looping entry is skipped. Sorted.
std::vector<std::filesystem::path> dir_entries(const std::filesystem::path& dir);
std::vector<std::filesystem::path> tree_files(const std::filesystem::path& dir);

// A relative '/'-separated path that stays below its root: not empty, no leading '/', no empty,
// "." or ".." segment, no backslash or NUL. Paths from a server listing and from names must pass
// before they become file names.
bool safe_relative_path(std::string_view p);

}  // namespace minfer::hub
