// Loading a Tokenizer from GGUF metadata and encoding text (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "gguf/reader.h"
#include "tokenizer/tokenizer-impl.h"

namespace minfer {

namespace {

// Per-call working memory, reused across the fragments and words of one encode() call.
struct EncodeScratch {
  PreTokenizeScratch pre;
  std::vector<uint32_t> word_ends;
  BpeScratch bpe;
  SpmScratch spm;
  std::string escaped;
};

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Expected<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  auto t = from_metadata(file.metadata());
  if (!t) return make_error("{}: {}", file.path(), t.error().message);
  return t;
}

Expected<Tokenizer> Tokenizer::from_metadata(const std::vector<GgufKV>& metadata) {
  const MetadataIndex md(metadata);
  auto vocab = Vocab::load(md);
  if (!vocab) return vocab.error();
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(*vocab);
  Vocab& v = impl->vocab;
  impl->spm = v.model == "llama";
  if (impl->spm) {
    v.pre = "default";  // SentencePiece has no pre-tokenizer; the key is ignored
    impl->spm_model.emplace(v);
  } else {
    if (!md.find("tokenizer.ggml.pre")) {
      return make_error("tokenizer: tokenizer.ggml.pre is missing; a gpt2 (BPE) vocabulary needs it to "
                        "split text like its model was trained (supported: {})", pre_tokenizer_names());
    }
    auto pre = PreTokenizer::from_name(v.pre);
    if (!pre) return pre.error();
    impl->pre.emplace(std::move(*pre));
    if (!v.has_add_bos) v.add_bos = impl->pre->default_add_bos();
    auto merges = load_merges(md);
    if (!merges) return merges.error();
    auto bpe = BpeModel::build(v, *merges, impl->pre->ignore_merges());
    if (!bpe) return bpe.error();
    impl->bpe.emplace(std::move(*bpe));
  }
  impl->special.emplace(v);
  impl->build_pieces();
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode(text, add_bos, parse_special, out);
  return out;
}

void Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special, std::vector<int32_t>& out) const {
  const Impl& m = *impl_;
  if (add_bos && m.vocab.bos >= 0) out.push_back(m.vocab.bos);
  EncodeScratch s;
  // SentencePiece prefixes a space to the first fragment and to each one after a special token.
  bool after_special = true;
  auto encode_fragment = [&](std::string_view frag) {
    if (m.spm) {
      s.escaped.clear();
      if (m.vocab.add_space_prefix && after_special) s.escaped.append(kSpmSpace);
      for (char c : frag) {
        if (c == ' ') s.escaped.append(kSpmSpace);
        else s.escaped.push_back(c);
      }
      m.spm_model->encode(m.vocab, s.escaped, s.spm, out);
      return;
    }
    s.word_ends.clear();
    m.pre->split(frag, s.pre, s.word_ends);
    const bool ignore_merges = m.pre->ignore_merges();
    size_t start = 0;
    for (uint32_t end : s.word_ends) {
      m.bpe->encode_word(frag.substr(start, end - start), ignore_merges, s.bpe, out);
      start = end;
    }
  };
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };  // C isspace
  size_t pos = 0;
  while (pos < text.size()) {
    const SpecialMatcher::Hit hit = m.special->find(text, pos, parse_special);
    const uint8_t attr = hit.id >= 0 ? m.vocab.attr[hit.id] : 0;
    size_t frag_end = hit.id >= 0 ? hit.pos : text.size();
    if (attr & kAttrLstrip) {
      while (frag_end > pos && is_space(text[frag_end - 1])) --frag_end;
    }
    if (frag_end > pos) {
      encode_fragment(text.substr(pos, frag_end - pos));
      after_special = false;
    }
    if (hit.id < 0) break;
    out.push_back(hit.id);
    after_special = true;
    pos = hit.pos + hit.len;
    if (attr & kAttrRstrip) {
      while (pos < text.size() && is_space(text[pos])) ++pos;
    }
  }
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.n; }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos; }
int32_t Tokenizer::eot_id() const { return impl_->vocab.eot; }
int32_t Tokenizer::fim_id(Fim which) const { return impl_->vocab.fim[static_cast<int>(which)]; }
int32_t Tokenizer::unk_id() const { return impl_->vocab.unk; }
int32_t Tokenizer::pad_id() const { return impl_->vocab.pad; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->spm && impl_->vocab.add_space_prefix; }
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->vocab.eog; }
bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->vocab.eog.begin(), impl_->vocab.eog.end(), id);
}
const std::string& Tokenizer::model() const { return impl_->vocab.model; }
const std::string& Tokenizer::pre() const { return impl_->vocab.pre; }

std::string_view Tokenizer::token_text(int32_t id) const {
  return id >= 0 && id < impl_->vocab.n ? impl_->vocab.token(id) : std::string_view();
}
TokenType Tokenizer::token_type(int32_t id) const {
  return id >= 0 && id < impl_->vocab.n ? static_cast<TokenType>(impl_->vocab.type[id]) : TokenType::kUndefined;
}
float Tokenizer::token_score(int32_t id) const {
  return id >= 0 && id < impl_->vocab.n ? impl_->vocab.score[id] : 0.0f;
}
int32_t Tokenizer::find_token(std::string_view text) const { return impl_->vocab.by_text.find(text); }

}  // namespace minfer
