// Speculative decoding's command-line options, declared once for the main command, --cnv and
// serve, and the setup they lead to: the draft model loaded and checked against the target's
// vocabulary, its context, and a Speculator for one sequence (docs/speculative.md).
//
//   SpecOptions so;
//   add_spec_options(app, so);
//   ... app.parse(...);
//   auto spec = SpecSetup::create(so, target_tok, {.n_seq = 1, .n_ctx_seq = n_ctx, ...});
//   if (!spec) return fail(spec.error());            // bad flag, unknown model, other vocabulary
//   Speculator* sp = *spec ? (*spec)->speculator(0) : nullptr;   // null: not asked for
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/context.h"
#include "runtime/draft-model.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace minfer {
class Model;
}

namespace minfer::cli {

struct SpecOptions {
  std::string draft;   // --spec-draft MODEL
  SpecParams p;        // --spec-draft-n, --spec-draft-min, --spec-draft-p-min, --spec-draft-adaptive / -fixed, --spec-ngram...
  std::string types;   // llama.cpp's --spec-type list (none, draft-simple, ngram-*): applied by finish_spec_options
  const char* length_flag = nullptr;  // --spec-draft-adaptive or --spec-draft-fixed, the last given
  bool length_flags_clash = false;    // both were given (refused)
  bool on() const { return !draft.empty() || p.ngram; }
};

void add_spec_options(CLI::App& app, SpecOptions& o);
// Applies --spec-type (llama.cpp's: "draft-simple" uses the draft model, "ngram-*" n-gram
// lookup, "none" neither; a draft model without draft-simple is not used), then checks.
Status finish_spec_options(SpecOptions& o);
// OK, or the error naming the bad option (validate(SpecParams), an adaptive length with no source).
Status check_spec_options(const SpecOptions& o);

// The draft model NAME (resolved like MODEL), loaded, its vocabulary checked against `target`.
struct LoadedDraft {
  std::shared_ptr<const Model> model;
  std::optional<Tokenizer> tok;
  std::string name;  // general.name, or the path
};
Expected<LoadedDraft> load_draft(const std::string& name, const Tokenizer& target);

class SpecSetup {
 public:
  // Null when neither a draft model nor n-gram drafting was asked for. `cp` is the target's
  // context: the draft model gets the same sequences, positions (up to its own training
  // context), batch and threads.
  static Expected<std::unique_ptr<SpecSetup>> create(const SpecOptions& o, const Tokenizer& target, ContextParams cp);

  Speculator* speculator(int seq) { return &specs_[static_cast<size_t>(seq)]; }
  DraftModel* draft() { return draft_.get(); }
  const std::string& draft_name() const { return draft_name_; }
  const SpecParams& params() const { return p_; }
  std::string describe() const;  // "[spec] draft NAME, up to 4 tokens (adaptive) + n-gram 2..5"

 private:
  SpecParams p_;
  LoadedDraft loaded_;
  std::unique_ptr<DraftModel> draft_;
  std::string draft_name_;
  std::vector<Speculator> specs_;  // [n_seq]
};

}  // namespace minfer::cli
