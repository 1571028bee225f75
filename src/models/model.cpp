#include "models/model.h"

#include "models/arch.h"

namespace minfer {

Expected<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) return f.error();
  auto arch_name = f->get_string("general.architecture");
  if (!arch_name) return make_error("model {}: {}", path, arch_name.error().message);
  const ArchSpec* arch = find_arch(*arch_name);
  if (!arch) {
    std::string names;
    for (const std::string& n : supported_architectures()) names += (names.empty() ? "" : ", ") + n;
    return make_error("model {}: unsupported architecture '{}' (supported: {})", path, *arch_name, names);
  }
  auto m = std::make_shared<Model>(std::move(*f), arch);
  auto hp = arch->load_hparams(m->file_);
  if (!hp) return make_error("{} ({}, architecture {})", hp.error().message, path, *arch_name);
  m->hp_ = std::move(*hp);
  if (Status s = arch->bind_weights(m->file_, m->hp_, m->w_); !s)
    return make_error("{} ({}, architecture {})", s.error().message, path, *arch_name);
  m->hp_.tied_output = m->w_.output == m->w_.tok_embd;
  return std::shared_ptr<const Model>(std::move(m));
}

Graph Model::build_graph(const GraphParams& p) const { return arch_->build(*this, p); }
Graph Model::build_kv_move(const KvMoveParams& p) const { return arch_->build_kv_move(*this, p); }

}  // namespace minfer
