// Embedding jobs on the engine (engine-impl.h): a job takes a free slot (its cached conversation
// is given up) and reads its inputs one after another, one decode_embeddings pass over every
// embedding slot's next chunk between two generation steps, so a long embedding request never
// holds generation up for more than a chunk.
#include <algorithm>

#include "server/embedding.h"
#include "server/engine-impl.h"

namespace minfer::server {

void Engine::Impl::start_embed(Slot& s, Job job) {
  s.job = std::move(job);
  s.run.emplace<EmbedRun>();
  s.cached.clear();
  ctx->seq_clear(s.id);
}

bool Engine::Impl::embed_step() {
  ebatch.clear();
  eowners.clear();
  efed.clear();
  int n = 0;
  for (Slot& s : slots) {
    EmbedRun* e = s.embed();
    if (!e) continue;
    const Job::Embed& how = *s.job.embed;
    const std::vector<int32_t>& in = how.inputs[e->input].ids;
    const int pos = ctx->seq_len(s.id);
    const int len = std::min(static_cast<int>(in.size()) - pos, p.n_batch);
    if (n > 0 && n + len > p.n_batch) continue;
    const bool all_rows = how.pooling == Pooling::kMean || how.pooling == Pooling::kNone;
    for (int i = pos; i < pos + len; ++i) {
      const bool keep = all_rows || (how.pooling == Pooling::kCls && i == 0) ||
                        (how.pooling == Pooling::kLast && i + 1 == static_cast<int>(in.size()));
      ebatch.add(in[static_cast<size_t>(i)], i, s.id, keep);
      if (keep) eowners.push_back(&s);
    }
    efed.emplace_back(&s, len);
    n += len;
  }
  if (n == 0) return false;
  auto out = ctx->decode_embeddings(ebatch);
  if (!out) {
    for (auto& [s, len] : efed) fail(*s, "decode failed: " + out.error().message, false);
    return true;
  }
  m.n_steps++;
  m.n_step_tokens += n;
  m.n_prompt_tokens += n;
  note_progress();
  const size_t d = static_cast<size_t>(ctx->n_embd());
  for (size_t r = 0; r < eowners.size(); ++r) {
    std::vector<float>& rows = eowners[r]->embed()->rows;
    rows.insert(rows.end(), out->begin() + static_cast<std::ptrdiff_t>(r * d), out->begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
  }
  for (auto& [sp, len] : efed) {
    Slot& s = *sp;
    EmbedRun& e = *s.embed();
    const Job::Embed& how = *s.job.embed;
    const Job::Embed::Input& in = how.inputs[e.input];
    if (ctx->seq_len(s.id) < static_cast<int>(in.ids.size())) continue;  // more chunks to come
    DoneEvent::Embedding v;  // this input is read: its vector(s)
    v.input = in.index;
    v.n_tokens = static_cast<int>(in.ids.size());
    const int n_rows = static_cast<int>(e.rows.size() / d);
    if (how.pooling == Pooling::kNone) {
      for (int r = 0; r < n_rows; ++r)
        v.rows.emplace_back(e.rows.begin() + static_cast<std::ptrdiff_t>(r * d), e.rows.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
    } else {
      std::vector<float> pooled = pool(e.rows, n_rows, static_cast<int>(d), how.pooling == Pooling::kMean ? Pooling::kMean : Pooling::kLast);
      normalize(pooled, how.normalize);
      v.rows.push_back(std::move(pooled));
    }
    e.out.push_back(std::move(v));
    e.rows.clear();
    ctx->seq_clear(s.id);
    if (++e.input < how.inputs.size()) continue;
    DoneEvent ev;  // every input is read: the job is done
    ev.finish_reason = "stop";
    ev.stop_type = "eos";
    ev.slot = s.id;
    for (const DoneEvent::Embedding& x : e.out) ev.usage.n_prompt += x.n_tokens;
    ev.embeddings = std::move(e.out);
    ev.usage.prompt_ms = std::chrono::duration<double, std::milli>(Clock::now() - s.started).count();
    m.prompt_s += ev.usage.prompt_ms / 1000.0;
    m.n_jobs_done++;
    send(s.job, JobEvent{s.job.index, std::move(ev)});
    release(s);
  }
  return true;
}

}  // namespace minfer::server
