// KV cache files (kv-file.h).
#include "runtime/kv-file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/atomic-file.h"
#include "models/model.h"

namespace minfer {
namespace {

constexpr char kMagic[8] = {'M', 'I', 'N', 'F', 'E', 'R', 'K', 'V'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 4 * 5 + 8 + 8;  // 68

void put_u32(std::string& b, uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& b, uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }

uint32_t get_u32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t get_u64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

}  // namespace

ModelIdentity model_identity(const GgufFile& file) {
  ModelIdentity id;
  id.file_size = file.total_file_size();
  uint64_t h = fnv1a64(nullptr, 0);
  for (const GgufKV& kv : file.metadata()) h = fnv1a64(kv.key.data(), kv.key.size(), h);
  for (const GgufTensor& t : file.tensors()) {
    h = fnv1a64(t.name.data(), t.name.size(), h);
    const uint32_t type = static_cast<uint32_t>(t.type);
    h = fnv1a64(&type, sizeof type, h);
    for (int64_t d : t.shape) h = fnv1a64(&d, sizeof d, h);
    h = fnv1a64(&t.offset, sizeof t.offset, h);
    h = fnv1a64(t.data, std::min<size_t>(t.n_bytes, 4096), h);
  }
  id.hash = h;
  return id;
}

Status write_kv_file(const std::string& path, const ModelIdentity& id, const Context& ctx, int seq,
                     const std::vector<int32_t>& tokens, const std::string& text) {
  if (static_cast<int>(tokens.size()) != ctx.seq_len(seq))
    return make_error("kv file: {} tokens recorded but sequence {} holds {}", tokens.size(), seq, ctx.seq_len(seq));
  auto kv = ctx.kv_export(seq);
  if (!kv) return kv.error();
  return write_kv_file(path, id, ctx, tokens, text, *kv);
}

Status write_kv_file(const std::string& path, const ModelIdentity& id, const Context& ctx, const std::vector<int32_t>& tokens,
                     const std::string& text, std::span<const uint8_t> kv) {
  if (kv.size() != ctx.kv_export_bytes(static_cast<int>(tokens.size())))
    return make_error("kv file: {} KV bytes for {} positions, expected {}", kv.size(), tokens.size(),
                      ctx.kv_export_bytes(static_cast<int>(tokens.size())));
  const ModelHparams& hp = ctx.model().hparams();
  std::string head(kMagic, 8);
  put_u32(head, kVersion);
  put_u32(head, static_cast<uint32_t>(ctx.params().kv_type));  // the GGML type id
  put_u64(head, id.file_size);
  put_u64(head, id.hash);
  put_u32(head, static_cast<uint32_t>(hp.n_layer));
  put_u32(head, static_cast<uint32_t>(hp.n_embd_k()));
  put_u32(head, static_cast<uint32_t>(hp.n_embd_v()));
  put_u32(head, static_cast<uint32_t>(ctx.n_ctx_seq()));
  put_u32(head, static_cast<uint32_t>(tokens.size()));
  put_u64(head, text.size());
  put_u64(head, kv.size());
  MINFER_ASSERT(head.size() == kHeaderBytes);
  head.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int32_t));
  head += text;
  uint64_t h = fnv1a64(head.data(), head.size());
  h = fnv1a64(kv.data(), kv.size(), h);
  std::string tail;
  put_u64(tail, h);
  return write_file_atomic(path, head, kv.data(), kv.size(), tail);
}

Expected<KvFileContents> read_kv_file(const std::string& kv_path, const ModelIdentity& id, const Context& s) {
  // The header is read and checked first: nothing is allocated for a file that is not a cache
  // of this model and context, whatever its size.
  std::ifstream f(kv_path, std::ios::binary | std::ios::ate);
  if (!f) return make_error("cannot read '{}'", kv_path);
  const auto end = f.tellg();
  if (end < 0) return make_error("cannot read '{}'", kv_path);
  const uint64_t size = static_cast<uint64_t>(end);
  if (size < kHeaderBytes + 8) return make_error("'{}' is truncated ({} bytes, header alone is {})", kv_path, size, kHeaderBytes + 8);
  uint8_t head[kHeaderBytes];
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(head), kHeaderBytes)) return make_error("cannot read '{}'", kv_path);
  if (std::memcmp(head, kMagic, 8) != 0) return make_error("'{}' is not a minfer KV file (bad magic)", kv_path);
  const uint8_t* p = head + 8;
  const uint32_t version = get_u32(p);
  if (version != kVersion) return make_error("'{}' has version {}, this minfer reads {}", kv_path, version, kVersion);
  const uint32_t kv_type = get_u32(p + 4);
  const uint64_t file_size = get_u64(p + 8), hash = get_u64(p + 16);
  const uint32_t n_layer = get_u32(p + 24), n_embd_k = get_u32(p + 28), n_embd_v = get_u32(p + 32);
  const uint32_t n_past = get_u32(p + 40);
  const uint64_t text_bytes = get_u64(p + 44), kv_bytes = get_u64(p + 52);
  if (file_size != id.file_size || hash != id.hash)
    return make_error("'{}' was saved with another model (size {} hash {:016x}, this one: size {} hash {:016x})", kv_path,
                      file_size, hash, id.file_size, id.hash);
  const ModelHparams& hp = s.model().hparams();
  const DType want_type = s.params().kv_type;
  if (kv_type != static_cast<uint32_t>(want_type)) {
    const auto saved = dtype_info(kv_type);
    return make_error("'{}' holds a {} cache, this context uses {} (--kv-type {})", kv_path,
                      saved ? kv_type_name(saved->type) : fmt::format("type {}", kv_type), kv_type_name(want_type),
                      saved ? kv_type_name(saved->type) : "?");
  }
  if (n_layer != hp.n_layer || n_embd_k != hp.n_embd_k() || n_embd_v != hp.n_embd_v())
    return make_error("'{}' has cache rows of {} layers x ({}, {}), the model has {} x ({}, {})", kv_path, n_layer, n_embd_k,
                      n_embd_v, hp.n_layer, hp.n_embd_k(), hp.n_embd_v());
  if (static_cast<int64_t>(n_past) >= s.n_ctx_seq())
    return make_error("'{}' holds {} positions, more than the context {} leaves room for (raise -c)", kv_path, n_past, s.n_ctx_seq());
  if (text_bytes > size || kv_bytes > size || kHeaderBytes + uint64_t{n_past} * 4 + text_bytes + kv_bytes + 8 != size)
    return make_error("'{}' is {} bytes but its header describes {} (truncated or corrupt)", kv_path, size,
                      kHeaderBytes + uint64_t{n_past} * 4 + text_bytes + kv_bytes + 8);
  if (kv_bytes != s.kv_export_bytes(static_cast<int>(n_past)))
    return make_error("'{}' has {} KV bytes for {} positions, this context keeps {} (saved with another --swa-full or -b?)",
                      kv_path, kv_bytes, n_past, s.kv_export_bytes(static_cast<int>(n_past)));
  std::vector<uint8_t> b(static_cast<size_t>(size));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size())))
    return make_error("cannot read '{}'", kv_path);
  const uint64_t sum = fnv1a64(b.data(), b.size() - 8);
  if (sum != get_u64(b.data() + b.size() - 8)) return make_error("'{}' fails its checksum (corrupt)", kv_path);
  KvFileContents c;
  const uint8_t* q = b.data() + kHeaderBytes;
  c.tokens.resize(n_past);
  std::memcpy(c.tokens.data(), q, size_t{n_past} * 4);
  q += size_t{n_past} * 4;
  c.text.assign(reinterpret_cast<const char*>(q), text_bytes);
  q += text_bytes;
  c.kv.assign(q, q + kv_bytes);
  for (int32_t t : c.tokens)
    if (t < 0 || t >= s.n_vocab()) return make_error("'{}' holds token {} outside the vocabulary", kv_path, t);
  return c;
}

}  // namespace minfer
