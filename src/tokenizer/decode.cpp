// Token ids back to bytes: one precomputed piece per token, and the streaming decoder.
#include "tokenizer/tokenizer-impl.h"
#include "tokenizer/unicode.h"

namespace minfer {

void Tokenizer::Impl::build_pieces() {
  const Vocab& v = vocab;
  piece_off.reserve(v.n + 1);
  piece_special.assign(v.n, 0);
  pieces.reserve(v.text.size());
  const ByteLevel& bl = byte_level();
  for (int32_t id = 0; id < v.n; ++id) {
    piece_off.push_back(static_cast<uint32_t>(pieces.size()));
    const std::string_view t = v.token(id);
    const uint8_t a = v.attr[id];
    if (a & (kAttrControl | kAttrUnknown)) {
      piece_special[id] = 1;
      pieces.append(t);
    } else if (a & kAttrUserDefined) {
      pieces.append(t);  // user-defined tokens are stored as plain text
    } else if (a & kAttrNormal) {
      if (spm) {
        for (size_t i = 0; i < t.size();) {  // U+2581 is SentencePiece's space
          if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
            pieces.push_back(' ');
            i += 3;
          } else {
            pieces.push_back(t[i++]);
          }
        }
      } else {
        const size_t before = pieces.size();
        if (!bl.decode(t, pieces)) {  // a character outside the byte map: keep the text
          pieces.resize(before);
          pieces.append(t);
        }
      }
    } else if (a & kAttrByte) {
      const int b = parse_byte_token(t);
      if (b >= 0) pieces.push_back(static_cast<char>(b));
      else if (!spm && !bl.decode(t, pieces)) pieces.append(t);
    }
    // unused and undefined tokens decode to nothing, as in llama.cpp
  }
  piece_off.push_back(static_cast<uint32_t>(pieces.size()));
}

std::string_view Tokenizer::piece(int32_t id, bool render_special) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= m.vocab.n || (!render_special && m.piece_special[id])) return {};
  return std::string_view(m.pieces.data() + m.piece_off[id], m.piece_off[id + 1] - m.piece_off[id]);
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < impl_->vocab.n && impl_->piece_special[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, DecodeOptions opt) const {
  std::string out;
  bool first_text = opt.strip_space_prefix && add_space_prefix();
  for (int32_t id : ids) {
    std::string_view p = piece(id, opt.render_special);
    if (first_text && id >= 0 && id < n_vocab() && !is_control(id)) {
      if (!p.empty() && p[0] == ' ') p.remove_prefix(1);
      first_text = false;
    }
    out.append(p);
  }
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  std::string_view p = tok_->piece(id, opt_.render_special);
  if (first_ && opt_.strip_space_prefix && tok_->add_space_prefix() && !tok_->is_control(id) &&
      id >= 0 && id < tok_->n_vocab()) {
    if (!p.empty() && p[0] == ' ') p.remove_prefix(1);
    first_ = false;
  }
  held_.append(p);
  const size_t keep = utf8_incomplete_tail(held_.data(), held_.size());
  std::string ready = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(held_);
  return rest;
}

}  // namespace minfer
