// One generation step of one sequence, shared by the one-shot CLI, the chat REPL and every
// server slot: sample from a logits row -> end-of-generation -> UTF-8 stream decode -> stop
// strings -> length and context limits. The caller decodes the returned token and calls
// next() again with its logits, until a result says done.
//
//   TokenStep step(tok, sampler, {.n_predict = 64, .stop = {"\nUser:"}});
//   for (auto logits = ctx.decode(prompt_batch);;) {
//     auto r = step.next(*logits, ctx.n_ctx_seq() - ctx.seq_len(s));
//     if (!r) return r.error();
//     write(r->text);                 // final text: whole characters, never part of a stop
//     if (r->done) break;             // r->reason says why
//     logits = decode r->token ...
//   }
//
// A caller that ends a generation early (client gone, deadline) calls end() to stop counting
// and to get nothing more.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/token-mask.h"
#include "grammar/trigger.h"
#include "sampling/sampler.h"
#include "sampling/stop.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

enum class StopReason { kLength, kEog, kStopString, kContextFull, kCancelled };
const char* stop_reason_name(StopReason r);  // "length", "eog", "stop", "context", "cancelled"

struct StepParams {
  int n_predict = 512;            // most tokens to generate; -1 = until the context is full
  std::vector<std::string> stop;  // stop strings, matched byte-wise on the output
  bool ignore_eog = false;        // keep going past end-of-generation tokens
  // A grammar the output must match (grammar/gbnf.h) and the vocabulary's token trie
  // (grammar_tokens(tok), built once per tokenizer); each TokenStep starts at its root.
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenTrie> grammar_tokens;
  // A lazy grammar (grammar/trigger.h): the output is free until one of these appears in it,
  // then the grammar takes the text from the trigger on and constrains every later token.
  // Empty: the grammar constrains the output from its first token.
  std::vector<GrammarTrigger> grammar_triggers;
};

// The tokenizer's vocabulary for grammar masks: each token's bytes (control tokens none) and
// its end-of-generation ids.
std::shared_ptr<const TokenTrie> grammar_tokens(const Tokenizer& tok);

class TokenStep {
 public:
  TokenStep(const Tokenizer& tok, Sampler& sampler, StepParams p);

  struct Result {
    int32_t token = -1;   // the sampled token (decode it next unless done)
    std::string text;     // final bytes that became visible with it (the rest, when done)
    bool done = false;
    StopReason reason = StopReason::kLength;
    bool eog = false;     // token is an end-of-generation token (not part of the output)
    int stop_index = -1;  // reason kStopString: which of StepParams::stop matched
  };
  // Samples from `logits` ([n_vocab], already masked by the caller where it constrains the
  // output); `room` is the number of positions still free in the sequence's context: with none
  // left the token cannot be decoded, so generation ends.
  Expected<Result> next(std::span<const float> logits, int room);
  // Ends the generation from outside (cancelled): no more text.
  void end() { done_ = true; }
  // Ends it from outside as a normal end (a deadline, a complete JSON value): the text the
  // decoder and the stop scanner still hold, which is final now.
  std::string finish();

  int n_gen() const { return n_gen_; }                             // tokens sampled
  const std::vector<int32_t>& tokens() const { return tokens_; }  // output tokens (no final eog)
  bool done() const { return done_; }

 private:
  const Tokenizer* tok_;
  Sampler* sampler_;
  StepParams p_;
  StreamDecoder text_;
  StopScanner stops_;
  int n_gen_ = 0;
  std::vector<int32_t> tokens_;
  std::unique_ptr<GrammarConstraint> grammar_;  // null: no grammar, or a lazy one not triggered yet
  std::string raw_;  // lazy grammar: the output bytes so far (until it triggers)
  Status trigger(int32_t token);
  std::vector<float> masked_;  // [n_vocab] the logits row with the grammar's mask
  Expected<int32_t> sample(std::span<const float> logits);
  bool done_ = false;
  std::string flush();
};

}  // namespace minfer
