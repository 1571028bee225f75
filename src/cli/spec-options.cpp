#include "cli/spec-options.h"

#include <fmt/format.h>

#include "cli/commands.h"
#include "models/model.h"

namespace minfer::cli {

void add_spec_options(CLI::App& app, SpecOptions& o) {
  SpecParams& p = o.p;
  const char* g = "Speculative decoding";
  app.add_option("--spec-draft,--model-draft", o.draft, "draft model (same vocabulary as MODEL) proposing tokens")->group(g);
  app.add_option("--spec-draft-n,--draft-max,--spec-draft-n-max", p.n_max, "most tokens drafted per step")
      ->capture_default_str()->group(g);
  app.add_option("--spec-draft-min,--draft-min,--spec-draft-n-min", p.n_min, "a shorter draft is not verified")
      ->capture_default_str()->group(g);
  app.add_option("--spec-draft-p-min,--draft-p-min", p.p_min, "the draft model stops below this probability")
      ->capture_default_str()->group(g);
  auto length = [&o](bool adaptive, const char* flag) {
    o.length_flags_clash = o.length_flags_clash || (o.length_flag && o.p.adaptive != adaptive);
    o.length_flag = flag;
    o.p.adaptive = adaptive;
  };
  app.add_flag_callback("--spec-draft-adaptive", [length] { length(true, "--spec-draft-adaptive"); },
                        "choose each draft's length from the measured acceptance and costs (the default)")
      ->group(g);
  app.add_flag_callback("--spec-draft-fixed", [length] { length(false, "--spec-draft-fixed"); },
                        "draft --spec-draft-n tokens whenever the source has them")
      ->group(g);
  app.add_flag("--spec-ngram", p.ngram, "draft from the prompt and the output (prompt lookup)")->group(g);
  app.add_option("--spec-ngram-min", p.ngram_params.n_min, "shortest repeated suffix that drafts")
      ->capture_default_str()->group(g);
  app.add_option("--spec-ngram-max", p.ngram_params.n_max, "longest suffix looked up")->capture_default_str()->group(g);
  app.add_option("--spec-type", o.types,
                 "llama.cpp's list of drafting types: draft-simple (the draft model), ngram-simple / ngram-map-k / ngram-mod / "
                 "ngram-cache (n-gram lookup), none")
      ->group(g);
  app.add_option("--spec-ngram-skip", p.ngram_params.skip,
                 "1: with no repeated suffix, match the tokens before the last one (an edit); 0: exact suffixes only")
      ->capture_default_str()->group(g);
}

Expected<LoadedDraft> load_draft(const std::string& name, const Tokenizer& target) {
  const std::string path = resolve_model(name);
  if (path.empty()) return make_error("draft model '{}' not found", name);
  auto m = Model::load(path);
  if (!m) return make_error("draft model '{}': {}", path, m.error().message);
  auto tok = Tokenizer::from_gguf((*m)->file());
  if (!tok) return make_error("draft model '{}': {}", path, tok.error().message);
  if (Status st = check_draft_vocab(target, *tok); !st)
    return make_error("draft model '{}' cannot draft for this model: {}", path, st.error().message);
  LoadedDraft d;
  d.name = (*m)->hparams().name.empty() ? path : (*m)->hparams().name;
  d.model = std::move(*m);
  d.tok.emplace(std::move(*tok));
  return d;
}

Status finish_spec_options(SpecOptions& o) {
  if (!o.types.empty()) {
    bool draft = false, ngram = false;
    size_t start = 0;
    for (size_t i = 0; i <= o.types.size(); ++i) {
      if (i < o.types.size() && o.types[i] != ',') continue;
      const std::string t = o.types.substr(start, i - start);
      start = i + 1;
      if (t == "none" || t.empty()) continue;
      if (t == "draft-simple") draft = true;
      else if (t == "ngram-simple" || t == "ngram-map-k" || t == "ngram-map-k4v" || t == "ngram-mod" || t == "ngram-cache") ngram = true;
      else if (t.starts_with("draft-")) return make_error("--spec-type {}: not supported (draft-simple, ngram-*, none)", t);
      else return make_error("--spec-type {}: unknown type (draft-simple, ngram-simple, ngram-map-k, ngram-mod, ngram-cache, none)", t);
    }
    if (draft && o.draft.empty()) return make_error("--spec-type draft-simple needs a draft model (--model-draft / --spec-draft MODEL)");
    if (!draft) o.draft.clear();
    o.p.ngram = o.p.ngram || ngram;
  }
  return check_spec_options(o);
}

Status check_spec_options(const SpecOptions& o) {
  if (!o.on()) {
    if (o.length_flag) return make_error("{} needs --spec-draft MODEL or --spec-ngram", o.length_flag);
    return Status::ok();
  }
  if (o.length_flags_clash) return make_error("--spec-draft-adaptive and --spec-draft-fixed: give one (adaptive is the default)");
  return validate(o.p);
}

Expected<std::unique_ptr<SpecSetup>> SpecSetup::create(const SpecOptions& o, const Tokenizer& target, ContextParams cp) {
  MINFER_TRY(check_spec_options(o));
  if (!o.on()) return std::unique_ptr<SpecSetup>();
  std::unique_ptr<SpecSetup> s(new SpecSetup());
  s->p_ = o.p;
  if (!o.draft.empty()) {
    auto d = load_draft(o.draft, target);
    if (!d) return d.error();
    s->loaded_ = std::move(*d);
    cp.fuse = true;
    auto dm = DraftModel::create(s->loaded_.model, *s->loaded_.tok, target, cp);
    if (!dm) return make_error("draft model '{}': {}", o.draft, dm.error().message);
    s->draft_ = std::move(*dm);
    s->draft_name_ = s->loaded_.name;
  }
  s->specs_.reserve(static_cast<size_t>(cp.n_seq));
  for (int i = 0; i < cp.n_seq; ++i) s->specs_.emplace_back(s->p_, s->draft_.get(), i);
  return s;
}

std::string SpecSetup::describe() const {
  std::string out = "[spec]";
  if (draft_) out += fmt::format(" draft model {}", draft_name_);
  if (draft_ && p_.ngram) out += " +";
  if (p_.ngram) out += fmt::format(" n-gram {}..{}", p_.ngram_params.n_min, p_.ngram_params.n_max);
  out += fmt::format(", up to {} tokens{}", p_.n_max, p_.adaptive ? " (adaptive)" : "");
  return out;
}

}  // namespace minfer::cli
