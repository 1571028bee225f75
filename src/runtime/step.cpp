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

TokenStep::TokenStep(const Tokenizer& tok, Sampler& sampler, StepParams p)
    : tok_(&tok), sampler_(&sampler), p_(std::move(p)), text_(tok), stops_(p_.stop) {}

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
  auto id = sampler_->sample(logits);
  if (!id) return id.error();
  r.token = *id;
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
  } else if (p_.n_predict >= 0 && n_gen_ >= p_.n_predict) {
    finish(StopReason::kLength);
  } else if (room < 1) {
    finish(StopReason::kContextFull);
  }
  return r;
}

}  // namespace minfer
