#include "cli/main-setup.h"

#include <fmt/format.h>

#include <cstdio>

#include "cli/notice.h"

namespace minfer::cli {

Expected<MainSetup> prepare_main(const MainOptions& o, const std::string& path) {
  o.ctx.compat.warn(o.ctx.n_threads);
  MainSetup r;
  auto lm = load_runnable(path, o.ctx);
  if (!lm) return lm.error();
  r.lm = std::move(*lm);
  const Tokenizer& tok = *r.lm.tok;
  Session& s = *r.lm.session;
  auto sp = o.sampling.to_params(tok.n_vocab());
  if (!sp) return sp.error();
  auto sampler = Sampler::create(*sp, tok.n_vocab());
  if (!sampler) return sampler.error();
  r.sampler.emplace(std::move(*sampler));
  ContextParams draft_cp = s.context().params();
  draft_cp.n_ctx_seq = s.n_ctx();
  auto spec = SpecSetup::create(o.spec, tok, draft_cp);
  if (!spec) return spec.error();
  r.spec = std::move(*spec);

  const ModelHparams& hp = r.lm.model->hparams();
  info(fmt::format("[model] {}: {}, {} threads, ctx {}, {} KV", hp.name, hp.arch, s.n_threads(), s.n_ctx(), o.ctx.kv.name()));
  if (o.log.verbose)
    for (const std::string& d : s.context().backend_descriptions()) std::fprintf(stderr, "[backend] %s\n", d.c_str());
  if (const std::string where = s.context().placement(); !where.empty()) info("[offload] " + where);
  if (o.log.verbose)
    std::fprintf(stderr, "[sampler] seed %llu: %s\n", static_cast<unsigned long long>(r.sampler->seed()),
                 r.sampler->describe().c_str());
  if (r.spec) info(r.spec->describe());
  return r;
}

}  // namespace minfer::cli
