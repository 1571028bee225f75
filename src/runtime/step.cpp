#include "runtime/step.h"

namespace minfer {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kEog: return "eog";
    case StopReason::kStopString: return "stop";
    case StopReason::kContextFull: return "context";
    case StopReason::kCancelled: return "cancelled";
  }
  return "?";
}

std::shared_ptr<const TokenTrie> grammar_tokens(const Tokenizer& tok) {
  GrammarVocab v;
  const auto n = static_cast<int32_t>(tok.n_vocab());
  v.pieces.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    v.pieces.emplace_back(tok.piece(id, false));
    if (tok.is_eog(id)) v.eog.push_back(id);
  }
  return std::make_shared<const TokenTrie>(v);
}

TokenStep::TokenStep(const Tokenizer& tok, Sampler& sampler, StepParams p)
    : tok_(&tok), sampler_(&sampler), p_(std::move(p)), text_(tok), stops_(p_.stop) {
  if (p_.grammar) {
    MINFER_ASSERT(p_.grammar_tokens);
    if (p_.grammar_triggers.empty()) grammar_ = std::make_unique<GrammarConstraint>(p_.grammar, p_.grammar_tokens);
  }
}

// A lazy grammar not triggered yet: the token's bytes join the output; once a trigger is in
// it, the grammar starts and takes the text from the trigger on (the rest of this token).
Status TokenStep::trigger(int32_t token) {
  const size_t before = raw_.size();
  raw_ += tok_->piece(token);
  const auto hit = find_grammar_trigger(raw_, p_.grammar_triggers, before);
  if (!hit) return {};
  grammar_ = std::make_unique<GrammarConstraint>(p_.grammar, p_.grammar_tokens);
  const std::string_view rest = std::string_view(raw_).substr(hit->feed_from);
  if (!grammar_->accept_text(rest))
    return make_error("grammar: the text after the trigger '{}' does not fit the grammar: '{}'",
                      raw_.substr(hit->begin, hit->feed_from - hit->begin), std::string(rest.substr(0, 40)));
  raw_.clear();
  return {};
}

// With a grammar: the sampler's choice from the whole row is kept when the grammar allows it;
// otherwise the row is masked and sampled again (llama.cpp's scheme). Greedy, that is exactly
// the argmax of the masked row; sampled, the first draw is kept when it fits. Either way a mask
// is built only for states where the model's own choice does not fit.
Expected<int32_t> TokenStep::sample(std::span<const float> logits) {
  if (!grammar_) return sampler_->sample(logits);
  {
    auto id = sampler_->sample(logits);
    if (id && grammar_->allows(*id)) return id;
  }
  masked_.assign(logits.begin(), logits.end());
  grammar_->apply(masked_);
  auto id = sampler_->sample(masked_);
  if (!id) return make_error("grammar: no token can continue the output here ({} generated)", n_gen_);
  return id;
}

// What the decoder and the scanner still hold is final once generation ends without a stop.
std::string TokenStep::flush() {
  std::string rest = stops_.feed(text_.flush()).text;
  if (!stops_.stopped()) rest += stops_.finish();
  return rest;
}

std::string TokenStep::finish() {
  if (done_) return {};
  done_ = true;
  return flush();
}

Expected<TokenStep::Result> TokenStep::next(std::span<const float> logits, int room) {
  MINFER_ASSERT(!done_);
  Result r;
  auto id = sample(logits);
  if (!id) return id.error();
  r.token = *id;
  if (grammar_) {
    if (!grammar_->accept(r.token)) return make_error("grammar: internal error: token {} was allowed but not accepted", r.token);
  } else if (p_.grammar && !tok_->is_eog(r.token)) {
    if (Status st = trigger(r.token); !st) return st.error();
  }
  sampler_->accept(r.token);
  ++n_gen_;
  auto finish = [&](StopReason why) {
    r.text += flush();
    r.done = done_ = true;
    r.reason = why;
  };
  if (tok_->is_eog(r.token) && !p_.ignore_eog) {
    r.eog = true;
    finish(StopReason::kEog);
    return r;
  }
  tokens_.push_back(r.token);
  const StopScanner::Step step = stops_.feed(text_.push(r.token));
  r.text = step.text;
  if (step.stopped) {
    r.done = done_ = true;
    r.reason = StopReason::kStopString;
    r.stop_index = step.stop_index;
  } else if (p_.n_predict >= 0 && n_gen_ >= p_.n_predict) {
    finish(StopReason::kLength);
  } else if (room < 1) {
    finish(StopReason::kContextFull);
  }
  return r;
}

}  // namespace minfer
