// The state of a `--cnv` conversation: the message history, and the tokens and text the
// session's KV cache holds. Each turn renders the whole history with the chat template and
// prefills only what the cache does not hold yet:
//   - incremental: the rendering starts with the cached text, so its suffix (the new user
//     message and the generation prompt) is tokenized and appended;
//   - re-render: otherwise (a template that rewrites earlier turns, a changed system prompt, a
//     SentencePiece vocabulary whose space prefix makes suffixes unsafe to tokenize alone), the
//     full rendering is tokenized and only the tokens after the common prefix are prefilled
//     (runtime/prefix-reuse.h: the same reuse as the server's slots).
// After a reply the turn is closed: the history rendered without a generation prompt extends
// what the cache holds by the end-of-turn text (<|im_end|>\n ...), which is prefilled at once,
// so an early stop (length, Ctrl-C, stop string) still leaves a well-formed turn in the cache,
// and the cache text equals the rendered history (what a session file saves).
// When a turn would not fit, the oldest turns leave the context window: their rows are removed
// from the cache in place (Session::kv_remove shifts and re-ropes the rest), so only the new
// message is prefilled. They are archived, not forgotten: all_messages() (what a session file
// saves) still holds them, and resuming with a smaller context archives more the same way.
//
//   Conversation conv(session, tok, sampler, render);
//   auto t = conv.turn("Hi", gen_params, n_reserve, sink);   // t->gen, t->n_prefill ...
//   conv.regen(gen_params, n_reserve, sink);                  // replaces the last reply
//
// The sampler's penalty window at each turn is the cached tokens followed by the prompt and the
// reply, so a turn samples the same whether the cache was built in this process or resumed.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/generate.h"
#include "models/model.h"
#include "runtime/session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

using Messages = nlohmann::ordered_json;  // [{"role": ..., "content": ...}, ...]
// Renders messages with the chat template (add_generation_prompt as given).
using RenderFn = std::function<Expected<std::string>(const Messages& messages, bool add_generation_prompt)>;

// Whether `next` extends `cached`, and by what.
struct PromptDelta {
  bool extends = false;
  std::string_view suffix;  // next.substr(cached.size()) when it extends
};
inline PromptDelta prompt_delta(std::string_view cached, std::string_view next) {
  if (!next.starts_with(cached)) return {};
  return {true, next.substr(cached.size())};
}

// Where to cut `cached` so that removing one contiguous range of tokens leaves exactly `target`:
// the token range [first, last) whose text is cached[a, a + cached.size() - target.size()),
// with a on a token boundary. ends[i] is the text offset where token i ends (the pieces of the
// tokens concatenated are `cached`). None when no such cut exists.
struct TokenCut {
  int first = 0, last = 0;
};
std::optional<TokenCut> find_token_cut(std::string_view cached, const std::vector<size_t>& ends, std::string_view target);

struct TurnStats {
  bool incremental = false;    // the rendering extended the cached text
  bool prefill_cancelled = false;  // on_prefill stopped the prompt: the turn was undone
  int n_prefill = 0;           // prompt tokens prefilled for this turn
  int n_close = 0;             // tokens prefilled after the reply to close the turn
  int n_dropped_messages = 0;  // context overflow: oldest messages archived
  int n_dropped_tokens = 0;    //   and their cache rows removed in place
  bool reprefilled = false;    //   (true: the cut was not possible, the cache was rebuilt)
  GenerateStats gen;
  std::string reply;
};

class Conversation {
 public:
  Conversation(Session& session, const Tokenizer& tok, Sampler& sampler, RenderFn render)
      : s_(session), tok_(tok), sampler_(sampler), render_(std::move(render)) {}

  // Speculative decoding for every reply (null: off); its draft model's cache follows the
  // conversation by itself (DraftModel syncs to the cached tokens at each draft).
  void set_speculator(Speculator* spec) { spec_ = spec; }
  Speculator* speculator() const { return spec_; }

  // The messages in the context window (the system prompt first, when there is one).
  const Messages& messages() const { return msgs_; }
  // Every message: the system prompt, the archived ones, then the rest of the window.
  Messages all_messages() const;
  int n_archived() const { return static_cast<int>(archived_.size()); }
  // Called between the batches of a long prompt (GenerateHooks::on_prefill); false stops it,
  // and the turn is undone (TurnStats::prefill_cancelled).
  void set_on_prefill(std::function<bool(int n_done, int n_total)> fn) { on_prefill_ = std::move(fn); }
  const std::vector<int32_t>& kv_tokens() const { return kv_tokens_; }
  const std::string& kv_text() const { return kv_text_; }
  std::string system() const;
  // Sets ("" removes) the system message; the cache follows at the next turn.
  void set_system(const std::string& text);
  // Drops every message but the system prompt (the archived ones too) and rewinds the cache to
  // what it keeps.
  Status clear();

  // n_reserve: positions kept free for the reply when deciding whether a turn fits.
  Expected<TurnStats> turn(const std::string& user, const GenerateParams& gp, int n_reserve, const TextSink& sink);
  // Replaces the last reply with a new one (greedy: the same one).
  Expected<TurnStats> regen(const GenerateParams& gp, int n_reserve, const TextSink& sink);

  // Resuming: every message (the first n_archived after a system prompt out of the window) and
  // a cache already loaded into the session (kv_tokens rows, whose text is kv_text). When the
  // window does not fit the context with n_reserve positions free, its oldest turns are archived
  // until it does. The cache is then brought to the rendered window.
  struct Restored {
    int n_prefilled = 0;  // tokens prefilled (0: the cache matched)
    int n_archived = 0;   // messages moved out of the window to fit this context
  };
  Expected<Restored> restore(Messages all, int n_archived, std::vector<int32_t> kv_tokens, std::string kv_text,
                             int n_reserve);

 private:
  struct Plan {
    int n_keep = 0;               // cached tokens kept
    std::vector<int32_t> tokens;  // to prefill after them
    bool incremental = false;
  };
  struct LastTurn {  // what /regen replays
    bool valid = false;
    size_t n_msgs = 0;  // history size after the reply
    int n_keep = 0;
    std::vector<int32_t> prompt;
    std::string prompt_text;
    SamplerState sampler;
    bool incremental = false;
  };

  Expected<std::string> render(const Messages& m, bool add_gen) const;
  std::vector<int32_t> encode_full(const std::string& text) const;
  Plan plan(const std::string& text) const;
  // Truncates the cache to plan.n_keep and prefills plan.tokens; the cache then holds `text`.
  Status apply(const Plan& p, const std::string& text);
  // Token end offsets in kv_text_, or empty when the pieces do not concatenate to it.
  std::vector<size_t> token_ends() const;
  // Archives the oldest turns until `text` (the next prompt) fits with n_reserve free positions.
  Status make_room(int n_reserve, TurnStats& st);
  // Keeps the cache's first n rows and the text they encode (the whole cache is dropped when
  // that text is not known).
  Status truncate_cache(int n);
  Expected<TurnStats> run_turn(const GenerateParams& gp, int n_reserve, const TextSink& sink,
                               const std::vector<int32_t>* replay);
  // Appends the end-of-turn text after a reply (see the file comment).
  Status close_turn(const std::string& prompt_text, TurnStats& st);

  Session& s_;
  const Tokenizer& tok_;
  Sampler& sampler_;
  RenderFn render_;
  Messages msgs_ = Messages::array();      // the window
  Messages archived_ = Messages::array();  // older messages out of the window, oldest first
  std::function<bool(int, int)> on_prefill_;
  std::vector<int32_t> kv_tokens_;  // the session's cache rows [0, n_past)
  std::string kv_text_;             // the text those tokens encode
  LastTurn last_;
  Speculator* spec_ = nullptr;
};

}  // namespace minfer::cli
