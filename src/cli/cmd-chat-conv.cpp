#include "cli/cmd-chat-conv.h"

#include <algorithm>

#include "runtime/prefix-reuse.h"

namespace minfer::cli {
namespace {

bool is_role(const nlohmann::ordered_json& m, std::string_view role) {
  return m.is_object() && m.contains("role") && m["role"].is_string() && m["role"].get<std::string>() == role;
}

}  // namespace

std::optional<TokenCut> find_token_cut(std::string_view cached, const std::vector<size_t>& ends, std::string_view target) {
  if (target.size() >= cached.size() || ends.empty() || ends.back() != cached.size()) return std::nullopt;
  const size_t removed = cached.size() - target.size();
  const size_t lcp = common_prefix(cached, target);
  // offs[k]: the text offset where token k starts (k = ends.size(): the end).
  std::vector<size_t> offs(ends.size() + 1, 0);
  for (size_t i = 0; i < ends.size(); ++i) offs[i + 1] = ends[i];
  for (size_t k = offs.size(); k-- > 0;) {
    const size_t o = offs[k];
    if (o > lcp) continue;
    const size_t o_end = o + removed;
    auto it = std::lower_bound(offs.begin() + static_cast<std::ptrdiff_t>(k), offs.end(), o_end);
    if (it == offs.end() || *it != o_end) continue;
    if (cached.substr(o_end) != target.substr(o)) continue;
    return TokenCut{static_cast<int>(k), static_cast<int>(it - offs.begin())};
  }
  return std::nullopt;
}

Messages Conversation::all_messages() const {
  Messages all = Messages::array();
  const size_t i0 = (!msgs_.empty() && is_role(msgs_[0], "system")) ? 1 : 0;
  if (i0) all.push_back(msgs_[0]);
  for (const auto& m : archived_) all.push_back(m);
  for (size_t i = i0; i < msgs_.size(); ++i) all.push_back(msgs_[i]);
  return all;
}

std::string Conversation::system() const {
  if (!msgs_.empty() && is_role(msgs_[0], "system") && msgs_[0]["content"].is_string())
    return msgs_[0]["content"].get<std::string>();
  return {};
}

void Conversation::set_system(const std::string& text) {
  const bool has = !msgs_.empty() && is_role(msgs_[0], "system");
  if (text.empty()) {
    if (has) msgs_.erase(msgs_.begin());
  } else if (has) {
    msgs_[0]["content"] = text;
  } else {
    msgs_.insert(msgs_.begin(), Messages{{"role", "system"}, {"content", text}});
  }
  last_.valid = false;
}

Expected<std::string> Conversation::render(const Messages& m, bool add_gen) const { return render_(m, add_gen); }

std::vector<int32_t> Conversation::encode_full(const std::string& text) const {
  // The template may already start with the BOS text; do not add a second BOS.
  bool add_bos = tok_.add_bos();
  if (add_bos && tok_.bos_id() >= 0 && text.starts_with(tok_.token_text(tok_.bos_id()))) add_bos = false;
  return tok_.encode(text, add_bos, /*parse_special=*/true);
}

Conversation::Plan Conversation::plan(const std::string& text) const {
  Plan p;
  // A SentencePiece vocabulary prefixes a space to text that starts a fragment, so a suffix is
  // only tokenized on its own for byte-level BPE vocabularies.
  if (!kv_tokens_.empty() && !tok_.add_space_prefix()) {
    const PromptDelta d = prompt_delta(kv_text_, text);
    if (d.extends) {
      p.n_keep = static_cast<int>(kv_tokens_.size());
      p.tokens = tok_.encode(d.suffix, false, /*parse_special=*/true);
      p.incremental = true;
      return p;
    }
  }
  std::vector<int32_t> full = encode_full(text);
  const size_t l = reusable_prefix(s_.context(), 0, kv_tokens_, full);
  p.n_keep = static_cast<int>(l);
  p.tokens.assign(full.begin() + static_cast<std::ptrdiff_t>(l), full.end());
  return p;
}

Status Conversation::apply(const Plan& p, const std::string& text) {
  MINFER_TRY(keep_prefix(s_.context(), 0, kv_tokens_, static_cast<size_t>(p.n_keep)));
  if (!p.tokens.empty()) {
    auto r = s_.decode(p.tokens, 1);
    if (!r) {  // the kept prefix's text is not known any more: start the cache over
      s_.clear();
      kv_tokens_.clear();
      kv_text_.clear();
      return r.error();
    }
    kv_tokens_.insert(kv_tokens_.end(), p.tokens.begin(), p.tokens.end());
  }
  kv_text_ = text;
  return Status::ok();
}

std::vector<size_t> Conversation::token_ends() const {
  std::vector<size_t> ends;
  ends.reserve(kv_tokens_.size());
  size_t off = 0;
  for (size_t i = 0; i < kv_tokens_.size(); ++i) {
    std::string_view pc = tok_.piece(kv_tokens_[i], /*render_special=*/true);
    // A BOS the tokenizer added (not in the rendered text) takes no text.
    if (i == 0 && kv_tokens_[0] == tok_.bos_id() && !std::string_view(kv_text_).starts_with(pc)) pc = {};
    if (kv_text_.compare(off, pc.size(), pc) != 0) return {};
    off += pc.size();
    ends.push_back(off);
  }
  if (off != kv_text_.size()) return {};
  return ends;
}

Status Conversation::clear() {
  Messages kept = Messages::array();
  if (!msgs_.empty() && is_role(msgs_[0], "system")) kept.push_back(msgs_[0]);
  msgs_ = std::move(kept);
  archived_ = Messages::array();
  last_.valid = false;
  sampler_.reset();
  auto target = render(msgs_, false);
  const std::vector<size_t> ends = token_ends();
  if (!target || ends.empty()) {
    s_.clear();
    kv_tokens_.clear();
    kv_text_.clear();
    return target ? Status::ok() : Status(target.error());
  }
  // Keep the longest cached prefix that ends on a token boundary inside the rendered system part.
  const size_t lcp = common_prefix(kv_text_, *target);
  size_t k = 0;  // tokens kept
  size_t text_len = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    if (ends[i] > lcp) break;
    k = i + 1;
    text_len = ends[i];
  }
  if (!s_.can_keep(static_cast<int>(k))) k = text_len = 0;
  MINFER_TRY(keep_prefix(s_.context(), 0, kv_tokens_, k));
  kv_text_.resize(text_len);
  return Status::ok();
}

Status Conversation::make_room(int n_reserve, TurnStats& st) {
  const int n_ctx = s_.n_ctx();
  auto text = render(msgs_, true);
  if (!text) return text.error();
  const Plan p0 = plan(*text);
  if (p0.n_keep + static_cast<int>(p0.tokens.size()) + n_reserve <= n_ctx) return Status::ok();

  // The smallest conversation that carries the message: the system prompt and the message.
  const size_t i0 = (!msgs_.empty() && is_role(msgs_[0], "system")) ? 1 : 0;
  Messages minimal = Messages::array();
  if (i0 == 1) minimal.push_back(msgs_[0]);
  minimal.push_back(msgs_.back());
  auto min_text = render(minimal, true);
  if (!min_text) return min_text.error();
  const int n_min = static_cast<int>(encode_full(*min_text).size());
  if (n_min >= n_ctx)
    return make_error("the message is too long: {} tokens with the chat template{}, but the context holds {} (raise -c); not sent",
                      n_min, i0 == 1 ? " and the system prompt" : "", n_ctx);

  // Drop whole turns, oldest first (a user message and everything up to the next one).
  Messages kept = msgs_;
  Messages out = Messages::array();  // what leaves the window, to the archive
  int dropped = 0;
  while (kept.size() - i0 > 1) {
    size_t j = i0 + 1;
    while (j + 1 < kept.size() && !is_role(kept[j], "user")) ++j;
    dropped += static_cast<int>(j - i0);
    for (size_t i = i0; i < j; ++i) out.push_back(kept[i]);
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i0), kept.begin() + static_cast<std::ptrdiff_t>(j));
    auto t = render(kept, true);
    if (!t) return t.error();
    if (static_cast<int>(encode_full(*t).size()) + n_reserve <= n_ctx) break;
  }
  if (dropped == 0) return Status::ok();  // only the new message: send it with less room for the reply

  // Remove the dropped turns' rows from the cache in place: the cached text minus one range
  // must be the kept history as the template renders it.
  Messages history = kept;
  history.erase(history.end() - 1);
  auto target = render(history, false);
  if (!target) return target.error();
  std::optional<TokenCut> cut;
  if (const std::vector<size_t> ends = token_ends(); !ends.empty()) cut = find_token_cut(kv_text_, ends, *target);
  if (cut) {
    MINFER_TRY(s_.kv_remove(cut->first, cut->last));
    kv_tokens_.erase(kv_tokens_.begin() + cut->first, kv_tokens_.begin() + cut->last);
    kv_text_ = *target;
    st.n_dropped_tokens = cut->last - cut->first;
  } else {
    st.n_dropped_tokens = s_.n_past();
    st.reprefilled = true;
    s_.clear();
    kv_tokens_.clear();
    kv_text_.clear();
  }
  st.n_dropped_messages = dropped;
  msgs_ = std::move(kept);
  for (auto& m : out) archived_.push_back(std::move(m));
  last_.valid = false;
  return Status::ok();
}

Status Conversation::truncate_cache(int n) {
  const int n_cached = static_cast<int>(kv_tokens_.size());
  MINFER_ASSERT(n >= 0 && n <= n_cached);
  if (n == n_cached) return s_.truncate(n);
  const std::vector<size_t> ends = token_ends();
  MINFER_TRY(keep_prefix(s_.context(), 0, kv_tokens_, static_cast<size_t>(n)));
  if (n == 0) {
    kv_text_.clear();
  } else if (ends.empty()) {  // the kept rows' text is not known: start the cache over
    s_.clear();
    kv_tokens_.clear();
    kv_text_.clear();
  } else {
    kv_text_.resize(ends[static_cast<size_t>(n) - 1]);
  }
  return Status::ok();
}

Expected<TurnStats> Conversation::turn(const std::string& user, const GenerateParams& gp, int n_reserve,
                                       const TextSink& sink) {
  msgs_.push_back({{"role", "user"}, {"content", user}});
  auto st = run_turn(gp, n_reserve, sink, nullptr);
  // A refused, failed or cancelled turn leaves no trace in the history.
  if ((!st || st->prefill_cancelled) && !msgs_.empty() && is_role(msgs_.back(), "user")) msgs_.erase(msgs_.end() - 1);
  return st;
}

Expected<TurnStats> Conversation::regen(const GenerateParams& gp, int n_reserve, const TextSink& sink) {
  if (msgs_.empty() || !is_role(msgs_.back(), "assistant")) return make_error("there is no reply to regenerate");
  const size_t n_msgs = msgs_.size();
  const Messages::value_type old_reply = msgs_.back();
  msgs_.erase(msgs_.end() - 1);
  // A regen that fails or is cancelled keeps the old reply in the history.
  auto keep_old = [&](Expected<TurnStats> st) {
    if ((!st || st->prefill_cancelled) && !(!msgs_.empty() && is_role(msgs_.back(), "assistant"))) msgs_.push_back(old_reply);
    return st;
  };
  auto text = render(msgs_, true);
  if (!text) return keep_old(text.error());
  // Replay the last turn's prefill exactly (same tokens, same batch, same logits) when the
  // cache still has its prefix; the sampler gets the window it had then and keeps its RNG.
  if (last_.valid && last_.n_msgs == n_msgs && static_cast<int>(kv_tokens_.size()) >= last_.n_keep &&
      *text == last_.prompt_text && s_.can_keep(last_.n_keep)) {
    if (Status ts = truncate_cache(last_.n_keep); !ts) return keep_old(ts.error());
    if (static_cast<int>(kv_tokens_.size()) == last_.n_keep) {
      SamplerState state = last_.sampler;
      state.rng = sampler_.checkpoint().rng;
      sampler_.restore(state);
      const std::vector<int32_t> prompt = last_.prompt;
      return keep_old(run_turn(gp, n_reserve, sink, &prompt));
    }
  }
  return keep_old(run_turn(gp, n_reserve, sink, nullptr));
}

Expected<TurnStats> Conversation::run_turn(const GenerateParams& gp, int n_reserve, const TextSink& sink,
                                           const std::vector<int32_t>* replay) {
  TurnStats st;
  std::vector<int32_t> prompt;
  std::string text;
  if (replay) {
    prompt = *replay;
    text = last_.prompt_text;
    st.incremental = last_.incremental;
  } else {
    MINFER_TRY(make_room(n_reserve, st));
    auto t = render(msgs_, true);
    if (!t) return t.error();
    text = std::move(*t);
    Plan p = plan(text);
    if (p.tokens.empty()) {  // the cache holds the whole prompt: recompute its last token's logits
      if (p.n_keep == 0) return make_error("the rendered prompt is empty");
      p.n_keep -= 1;
      p.tokens = {kv_tokens_[static_cast<size_t>(p.n_keep)]};
    }
    st.incremental = p.incremental;
    MINFER_TRY(truncate_cache(p.n_keep));
    if (static_cast<int>(kv_tokens_.size()) < p.n_keep) {  // the kept rows' text was unknown: all of it
      p = plan(text);
      st.incremental = false;
    }
    prompt = std::move(p.tokens);
  }
  last_ = LastTurn{true, 0, static_cast<int>(kv_tokens_.size()), prompt, text, sampler_.checkpoint(), st.incremental};
  // The penalty window is what the model sees: the cached tokens, then the prompt (generate()
  // adds it) and the reply. A resumed session or a replayed turn thus samples as the original.
  SamplerState window = sampler_.checkpoint();
  window.history.clear();
  sampler_.restore(window);
  sampler_.accept_prompt(kv_tokens_);

  std::string reply;
  GenerateHooks hooks;
  hooks.on_prefill = on_prefill_;
  auto g = generate(s_, tok_, sampler_, prompt, gp, [&](std::string_view t) {
    reply.append(t);
    return sink(t);
  }, hooks, GenerateSpec{spec_, kv_tokens_});
  if (!g) {
    s_.clear();
    kv_tokens_.clear();
    kv_text_.clear();
    last_.valid = false;
    return g.error();
  }
  if (g->prefill_cancelled) {  // the session is back at kv_tokens_: the caller undoes the turn
    if (s_.n_past() != static_cast<int>(kv_tokens_.size())) {  // a sliding-window ring could not go back
      s_.clear();
      kv_tokens_.clear();
      kv_text_.clear();
    }
    last_.valid = false;
    st.gen = *g;
    st.prefill_cancelled = true;
    return st;
  }
  st.gen = *g;
  st.n_prefill = g->n_prompt;
  st.reply = reply;
  // The cache holds the prompt and the generated tokens that were decoded (not the last one
  // sampled when generation stopped on it).
  kv_tokens_.insert(kv_tokens_.end(), prompt.begin(), prompt.end());
  const size_t n_gen_kv = static_cast<size_t>(s_.n_past()) - kv_tokens_.size();
  MINFER_ASSERT(n_gen_kv <= g->tokens.size());
  const std::span<const int32_t> gen_kv(g->tokens.data(), n_gen_kv);
  kv_tokens_.insert(kv_tokens_.end(), gen_kv.begin(), gen_kv.end());
  kv_text_ = text + tok_.decode(gen_kv);
  msgs_.push_back({{"role", "assistant"}, {"content", reply}});
  last_.n_msgs = msgs_.size();
  MINFER_TRY(close_turn(text, st));
  return st;
}

Status Conversation::close_turn(const std::string& prompt_text, TurnStats& st) {
  auto r = render(msgs_, false);
  if (!r) return Status::ok();  // a template that only renders with a generation prompt
  if (!r->starts_with(kv_text_)) {
    if (!r->starts_with(prompt_text)) return Status::ok();  // it rewrites the turn: the next one re-renders
    // The cache holds text the reply does not (a stop string): go back to the prompt's end.
    const int n = last_.n_keep + static_cast<int>(last_.prompt.size());
    if (!s_.can_keep(n)) {  // a sliding-window ring lost the prompt end's window: the next turn re-reads all
      s_.clear();
      kv_tokens_.clear();
      kv_text_.clear();
      return Status::ok();
    }
    MINFER_TRY(keep_prefix(s_.context(), 0, kv_tokens_, static_cast<size_t>(n)));
    kv_text_ = prompt_text;
  }
  const Plan p = plan(*r);
  if (p.n_keep + static_cast<int>(p.tokens.size()) > s_.n_ctx()) return Status::ok();  // no room: next turn
  st.n_close = static_cast<int>(p.tokens.size());
  return apply(p, *r);
}

Expected<Conversation::Restored> Conversation::restore(Messages all, int n_archived, std::vector<int32_t> kv_tokens,
                                                       std::string kv_text, int n_reserve) {
  MINFER_ASSERT(static_cast<int>(kv_tokens.size()) == s_.n_past());
  const size_t i0 = (!all.empty() && is_role(all[0], "system")) ? 1 : 0;
  const size_t n_arch = std::min(static_cast<size_t>(std::max(n_archived, 0)), all.size() - i0);
  msgs_ = Messages::array();
  archived_ = Messages::array();
  if (i0) msgs_.push_back(all[0]);
  for (size_t i = i0; i < all.size(); ++i) (i < i0 + n_arch ? archived_ : msgs_).push_back(all[i]);
  kv_tokens_ = std::move(kv_tokens);
  kv_text_ = std::move(kv_text);
  last_.valid = false;
  Restored r;
  auto target = render(msgs_, false);
  if (!target) return target.error();
  if (*target == kv_text_ && s_.n_past() + n_reserve <= s_.n_ctx()) return r;
  Plan p = plan(*target);
  // A smaller context than the one the session was saved with: the oldest turns leave the
  // window (to the archive) until the rest fits with room for a reply.
  while (p.n_keep + static_cast<int>(p.tokens.size()) + n_reserve > s_.n_ctx() && msgs_.size() > i0) {
    size_t j = i0 + 1;
    while (j < msgs_.size() && !is_role(msgs_[j], "user")) ++j;
    for (size_t i = i0; i < j; ++i) archived_.push_back(msgs_[i]);
    msgs_.erase(msgs_.begin() + static_cast<std::ptrdiff_t>(i0), msgs_.begin() + static_cast<std::ptrdiff_t>(j));
    r.n_archived += static_cast<int>(j - i0);
    target = render(msgs_, false);
    if (!target) return target.error();
    p = plan(*target);
  }
  if (p.n_keep + static_cast<int>(p.tokens.size()) >= s_.n_ctx())
    return make_error("the system prompt alone is {} tokens, more than the context holds ({}; raise -c)",
                      p.n_keep + static_cast<int>(p.tokens.size()), s_.n_ctx());
  MINFER_TRY(apply(p, *target));
  r.n_prefilled = static_cast<int>(p.tokens.size());
  return r;
}

}  // namespace minfer::cli
