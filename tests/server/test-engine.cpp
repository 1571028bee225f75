// The batching engine on the real SmolLM2 model ($MINFER_SMOLLM2): greedy output of a request
// is byte-equal alone, batched with other decodes, and batched beside another request's long
// (wide-path) prompt; and equal to the single-sequence Session + generate() path.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "runtime/generate.h"
#include "runtime/session.h"
#include "models/model.h"
#include "server/engine.h"
#include <nlohmann/json.hpp>

#include "grammar/json-schema.h"

namespace minfer::server {
namespace {

struct Fixture {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Fixture& fx() {
  static Fixture f = [] {
    const char* path = std::getenv("MINFER_SMOLLM2");
    EXPECT_NE(path, nullptr) << "set MINFER_SMOLLM2 to SmolLM2-135M-Instruct-Q4_1.gguf";
    Fixture r;
    if (!path) return r;
    auto m = Model::load(path);
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    if (!m) return r;
    r.model = *m;
    auto t = Tokenizer::from_gguf(r.model->file());
    EXPECT_TRUE(t);
    if (t) r.tok = std::make_unique<Tokenizer>(std::move(*t));
    return r;
  }();
  return f;
}

SamplerParams greedy() {
  SamplerParams p;
  p.temp = 0;
  p.repeat_penalty = 1.0f;
  p.seed = 1;
  return p;
}

std::vector<int32_t> chat_prompt(const std::string& user) {
  return fx().tok->encode("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n", false, true);
}

struct Result {
  std::string text;
  std::string reason;
  int n_gen = 0;
  int n_cached = 0;
};

std::shared_ptr<EventChannel> submit(Engine& e, const std::vector<int32_t>& prompt, int n_predict, int id_slot = -1,
                                     bool ignore_eog = false) {
  auto ch = std::make_shared<EventChannel>(1);
  Job j;
  j.prompt = prompt;
  j.sampling = greedy();
  j.n_predict = n_predict;
  j.id_slot = id_slot;
  j.ignore_eog = ignore_eog;
  j.channel = ch;
  std::vector<Job> jobs;
  jobs.push_back(std::move(j));
  EXPECT_TRUE(e.submit(std::move(jobs)));
  return ch;
}

Result collect(EventChannel& ch, int stop_after_events = -1, bool* hit = nullptr) {
  Result r;
  JobEvent ev;
  int n = 0;
  for (;;) {
    auto pr = ch.pop(ev, std::chrono::milliseconds(100));
    if (pr == EventChannel::kClosed) break;
    if (pr == EventChannel::kTimeout) continue;
    if (const auto* e = ev.as<ErrorEvent>()) ADD_FAILURE() << e->message;
    if (const TextDelta* d = ev.delta()) r.text += d->text;
    if (const auto* done = ev.as<DoneEvent>()) {
      r.reason = done->finish_reason;
      r.n_gen = done->usage.n_gen;
      r.n_cached = done->usage.n_cached;
    }
    if (++n == stop_after_events && hit) {
      *hit = true;
      return r;
    }
  }
  return r;
}

std::unique_ptr<Engine> make_engine(int n_slots) {
  EngineParams p;
  p.n_slots = n_slots;
  p.n_ctx_slot = 512;
  p.n_threads = 2;
  auto e = Engine::create(fx().model, *fx().tok, p);
  EXPECT_TRUE(e) << (e ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

TEST(ServerEngine, GreedyIndependentOfBatch) {
  ASSERT_TRUE(fx().model && fx().tok);
  const std::vector<int32_t> a = chat_prompt("What is the capital of France?");
  std::string long_user = "Summarize this: ";
  for (int i = 0; i < 12; ++i) long_user += "The quick brown fox jumps over the lazy dog. ";
  const std::vector<int32_t> b = chat_prompt(long_user);
  ASSERT_GE(b.size(), 100u);  // its prefill takes the wide attention path
  const std::vector<int32_t> c = chat_prompt("Name three colors.");

  std::vector<Result> solo;
  {
    auto e = make_engine(3);
    ASSERT_TRUE(e);
    for (const auto* p : {&a, &b, &c}) {
      auto ch = submit(*e, *p, 24);
      solo.push_back(collect(*ch));
      EXPECT_FALSE(solo.back().text.empty());
    }
  }
  // The same through the single-sequence Session + generate() (the CLI's path).
  {
    auto s = Session::create(fx().model, {.n_ctx = 512, .n_batch = 512, .n_threads = 2});
    ASSERT_TRUE(s);
    for (size_t i = 0; i < 3; ++i) {
      (*s)->clear();
      auto sampler = Sampler::create(greedy(), fx().tok->n_vocab());
      ASSERT_TRUE(sampler);
      std::string text;
      GenerateParams gp;
      gp.n_predict = 24;
      const auto& p = i == 0 ? a : i == 1 ? b : c;
      auto st = generate(**s, *fx().tok, *sampler, p, gp, [&](std::string_view t) {
        text += t;
        return true;
      });
      ASSERT_TRUE(st);
      EXPECT_EQ(text, solo[i].text) << "prompt " << i << ": engine differs from Session";
    }
  }
  // Concurrently: a decodes while b's 100+ token prompt is prefilled in the same step, c joins.
  auto e = make_engine(3);
  ASSERT_TRUE(e);
  auto cha = submit(*e, a, 24);
  bool hit = false;
  Result ra = collect(*cha, 3, &hit);
  ASSERT_TRUE(hit);
  auto chb = submit(*e, b, 24);
  auto chc = submit(*e, c, 24);
  Result ra2 = collect(*cha);
  ra.text += ra2.text;
  Result rb = collect(*chb);
  Result rc = collect(*chc);
  EXPECT_EQ(ra.text, solo[0].text);
  EXPECT_EQ(rb.text, solo[1].text);
  EXPECT_EQ(rc.text, solo[2].text);
  const EngineMetrics m = e->metrics();
  EXPECT_LT(m.n_steps, m.n_gen_tokens) << "the three requests never shared a forward pass";
}

TEST(ServerEngine, ReusesSlotPrefix) {
  ASSERT_TRUE(fx().model && fx().tok);
  auto e = make_engine(2);
  ASSERT_TRUE(e);
  const std::vector<int32_t> a = chat_prompt("What is 2 + 2?");
  Result r1 = collect(*submit(*e, a, 8));
  std::vector<int32_t> a2 = a;
  const auto more = fx().tok->encode(r1.text + "<|im_end|>\n<|im_start|>user\nAnd 3 + 3?<|im_end|>\n<|im_start|>assistant\n", false, true);
  a2.insert(a2.end(), more.begin(), more.end());
  Result r2 = collect(*submit(*e, a2, 8));
  EXPECT_GE(r2.n_cached, static_cast<int>(a.size()));  // the whole first prompt came from the cache
  EXPECT_GT(r2.n_gen, 0);
}

TEST(ServerEngine, CancelFreesSlot) {
  ASSERT_TRUE(fx().model && fx().tok);
  auto e = make_engine(1);
  ASSERT_TRUE(e);
  auto ch = submit(*e, chat_prompt("Tell me a long story."), 400);
  bool hit = false;
  collect(*ch, 2, &hit);
  ASSERT_TRUE(hit);
  ch->cancel();
  Result r = collect(*submit(*e, chat_prompt("Hi"), 3));  // the only slot is free again
  EXPECT_EQ(r.n_gen, 3);
  EXPECT_EQ(e->metrics().n_jobs_cancelled, 1);
}

// A job pinned to a busy slot (id_slot) waits for it; the jobs queued behind it take the free
// slots meanwhile.
TEST(ServerEngine, PinnedJobDoesNotHoldBackTheQueue) {
  ASSERT_TRUE(fx().model && fx().tok);
  auto e = make_engine(2);
  ASSERT_TRUE(e);
  auto submit_on = [&](const std::vector<int32_t>& prompt, int n_predict, int slot) {
    return submit(*e, prompt, n_predict, slot, /*ignore_eog=*/true);
  };
  auto long_job = submit_on(chat_prompt("Tell me a long story."), 200, 0);
  bool hit = false;
  collect(*long_job, 1, &hit);  // running on slot 0
  ASSERT_TRUE(hit);
  auto pinned = submit_on(chat_prompt("Hi"), 3, 0);
  auto free_one = submit_on(chat_prompt("Hello"), 3, -1);
  Result r = collect(*free_one);  // done on slot 1 while slot 0 is still busy
  EXPECT_EQ(r.n_gen, 3);
  EXPECT_TRUE(e->slots()[0].processing);
  long_job->cancel();
  EXPECT_EQ(collect(*pinned).n_gen, 3);
}

}  // namespace
}  // namespace minfer::server

namespace minfer::server {
namespace {

TEST(ServerEngine, JsonObjectOutputParses) {
  ASSERT_TRUE(fx().model && fx().tok);
  auto e = make_engine(1);
  ASSERT_TRUE(e);
  auto ch = std::make_shared<EventChannel>(1);
  Job j;
  j.prompt = chat_prompt("Give me a JSON object with a name and an age.");
  j.sampling = greedy();
  j.n_predict = 120;
  auto g = parse_gbnf(json_value_gbnf(/*object_only=*/true));
  ASSERT_TRUE(g);
  j.grammar = std::make_shared<const Grammar>(std::move(*g));
  j.channel = ch;
  std::vector<Job> jobs;
  jobs.push_back(std::move(j));
  ASSERT_TRUE(e->submit(std::move(jobs)));
  Result r = collect(*ch);
  EXPECT_EQ(r.reason, "stop") << r.text;  // the object closed well before 120 tokens
  const auto doc = nlohmann::json::parse(r.text, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(doc.is_object()) << r.text;
}

}  // namespace
}  // namespace minfer::server
