#include "sampling/stages.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/status.h"

namespace minfer {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

void Candidates::load(std::span<const float> row) {
  logits.resize(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    const float v = row[i];
    // NaN would break every comparison below; +inf would make exp() return NaN. -inf stays.
    logits[i] = std::isnan(v) ? kNegInf : (v == -kNegInf ? FLT_MAX : v);
  }
  ids.clear();
}

void Candidates::collect() {
  ids.resize(logits.size());
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    ids[n] = static_cast<int32_t>(i);
    n += logits[i] != kNegInf;
  }
  ids.resize(n);
}

namespace sampling {

namespace {

using Scratch = Candidates::Scratch;

// Positions into c.ids ordered by descending logit; equal logits keep id order (ids are
// ascending, so the lower position is the lower id). `lv` holds the survivors' logits.
struct ByLogitDesc {
  const float* lv;
  bool operator()(uint32_t a, uint32_t b) const {
    return lv[a] > lv[b] || (lv[a] == lv[b] && a < b);
  }
};

void gather_logits(const Candidates& c, std::vector<float>& lv) {
  lv.resize(c.ids.size());
  for (size_t i = 0; i < lv.size(); ++i) lv[i] = c.logits[c.ids[i]];
}

void iota_positions(std::vector<uint32_t>& v, size_t n) {
  v.resize(n);
  std::iota(v.begin(), v.end(), 0u);
}

// Keeps the ids at the marked positions, preserving ascending order.
void keep_marked(Candidates& c, const std::vector<uint8_t>& keep) {
  size_t out = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    c.ids[out] = c.ids[i];
    out += keep[i] != 0;
  }
  c.ids.resize(out);
}

// The survivors' highest logit.
float survivor_max(const Candidates& c) {
  float max = kNegInf;
  for (int32_t id : c.ids) max = std::max(max, c.logits[id]);
  return max;
}

// w[i] = exp((logit - max) / temp) for each survivor, max the highest (also handed back);
// returns their sum. The exponential is taken in float: glibc's expf is several times faster
// than exp, and its error (< 1 ulp) is far below anything sampling can resolve; the sum is kept
// in double.
double weights(const Candidates& c, float temp, std::vector<double>& w, float& max) {
  w.resize(c.ids.size());
  max = survivor_max(c);
  double total = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = std::exp((c.logits[c.ids[i]] - max) / temp);
    total += w[i];
  }
  return total;
}

double weights(const Candidates& c, float temp, std::vector<double>& w) {
  float max;
  return weights(c, temp, w, max);
}

void probabilities_into(const Candidates& c, float temp, std::vector<double>& p) {
  const double total = weights(c, temp, p);
  for (double& v : p) v /= total;
}

// Marks (s.keep) the shortest prefix of the ranking "key ascending, then position ascending"
// whose probability mass reaches p: mass > p when `strict`, >= p otherwise; everything if
// rounding keeps the total just short of p. Instead of sorting, it buckets the keys, keeps every
// bucket before the one where the mass crosses p and repeats inside that bucket: O(n) however
// many tokens the prefix holds (a flat distribution can put most of a 150k vocabulary in the
// nucleus, where a sort costs tens of milliseconds per token).
void mass_prefix(const std::vector<double>& key, const std::vector<double>& prob, double p,
                 bool strict, Scratch& s) {
  constexpr size_t kBuckets = 1024, kSortBelow = 64;
  const auto reached = [&](double mass, double need) {
    return strict ? mass > need : mass >= need;
  };
  s.keep.assign(key.size(), 0);
  std::vector<uint32_t>& cand = s.pos;
  iota_positions(cand, key.size());
  double mass[kBuckets];
  double need = p;
  for (;;) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (uint32_t i : cand) {
      if (std::isfinite(key[i])) lo = std::min(lo, key[i]), hi = std::max(hi, key[i]);
    }
    const double scale = static_cast<double>(kBuckets - 1) / (hi - lo);
    if (cand.size() <= kSortBelow || !(hi > lo) || !std::isfinite(scale)) {
      std::sort(cand.begin(), cand.end(), [&](uint32_t a, uint32_t b) {
        return key[a] < key[b] || (key[a] == key[b] && a < b);
      });
      double cum = 0.0;
      for (uint32_t i : cand) {
        s.keep[i] = 1;
        cum += prob[i];
        if (reached(cum, need)) break;
      }
      return;
    }
    // Bucketing is monotone in the key, so every key of a lower bucket ranks higher.
    std::fill(mass, mass + kBuckets, 0.0);
    s.bucket.resize(cand.size());
    for (size_t j = 0; j < cand.size(); ++j) {
      const double k = key[cand[j]];
      const size_t b = k <= hi ? std::min(static_cast<size_t>((k - lo) * scale), kBuckets - 1)
                               : kBuckets - 1;  // +inf (a typical score of p = 0)
      s.bucket[j] = static_cast<uint32_t>(b);
      mass[b] += prob[cand[j]];
    }
    double cum = 0.0;
    size_t cross = 0;
    while (cross < kBuckets && !reached(cum + mass[cross], need)) cum += mass[cross++];
    size_t n_left = 0;
    for (size_t j = 0; j < cand.size(); ++j) {
      if (s.bucket[j] < cross) s.keep[cand[j]] = 1;
      else if (s.bucket[j] == cross) cand[n_left++] = cand[j];
    }
    if (cross == kBuckets) return;  // rounding: everything is kept
    cand.resize(n_left);
    need -= cum;
  }
}

}  // namespace

void logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias) {
  for (const auto& [id, b] : bias) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] += b;
  }
}

void penalties(std::span<float> logits, std::span<const int32_t> window, float repeat,
               float frequency, float presence) {
  const bool use_repeat = repeat != 1.0f;
  if (window.empty() || (!use_repeat && frequency == 0.0f && presence == 0.0f)) return;
  std::vector<int32_t> sorted(window.begin(), window.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    const int32_t id = sorted[i];
    size_t j = i;
    while (j < sorted.size() && sorted[j] == id) ++j;
    const float count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float l = logits[id] - (count * frequency + presence);
    if (use_repeat) l = l > 0.0f ? l / repeat : l * repeat;
    logits[id] = l;
  }
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_v = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_v) {
      best_v = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

std::vector<double> probabilities(const Candidates& c, float temp) {
  std::vector<double> p;
  probabilities_into(c, temp, p);
  return p;
}

void top_n_sigma(Candidates& c, float n) {
  if (!(n > 0.0f) || c.ids.size() <= 1) return;  // NaN n: off too
  // Mean and spread in double (the survivors can be a whole vocabulary of similar logits).
  float max = kNegInf;
  double sum = 0.0;
  for (int32_t id : c.ids) {
    max = std::max(max, c.logits[id]);
    sum += c.logits[id];
  }
  const double mean = sum / static_cast<double>(c.ids.size());
  double sq = 0.0;
  for (int32_t id : c.ids) sq += (c.logits[id] - mean) * (c.logits[id] - mean);
  const double sigma = std::sqrt(sq / static_cast<double>(c.ids.size()));
  const double threshold = max - static_cast<double>(n) * sigma;
  std::vector<uint8_t>& keep = c.scratch.keep;
  keep.resize(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i) keep[i] = c.logits[c.ids[i]] >= threshold;
  keep_marked(c, keep);
}

void top_k(Candidates& c, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= c.ids.size()) return;
  // A heap of the best k so far with the worst on top; most tokens lose one comparison with
  // it, so this is O(n) on real logits (O(n log k) worst case). The order is strict and total
  // (logit descending, then id ascending), so the kept set is exact.
  using Entry = std::pair<float, int32_t>;
  const auto better = [](const Entry& a, const Entry& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<Entry>& heap = c.scratch.heap;
  heap.clear();
  for (int32_t id : c.ids) {
    const Entry e{c.logits[id], id};
    if (heap.size() < static_cast<size_t>(k)) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(e, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = e;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  c.ids.resize(heap.size());
  for (size_t i = 0; i < heap.size(); ++i) c.ids[i] = heap[i].second;
  std::sort(c.ids.begin(), c.ids.end());
}

void typical(Candidates& c, float p) {
  const size_t n = c.ids.size();
  if (p >= 1.0f || n <= 1) return;
  Scratch& s = c.scratch;
  probabilities_into(c, 1.0f, s.prob);
  double entropy = 0.0;
  for (double q : s.prob) {
    if (q > 0.0) entropy -= q * std::log(q);
  }
  s.key.resize(n);  // distance from the entropy: the ranking key
  for (size_t i = 0; i < n; ++i) {
    s.key[i] = s.prob[i] > 0.0 ? std::fabs(-std::log(s.prob[i]) - entropy)
                               : std::numeric_limits<double>::infinity();
  }
  mass_prefix(s.key, s.prob, p, /*strict=*/true, s);
  keep_marked(c, s.keep);
}

void top_p(Candidates& c, float p) {
  const size_t n = c.ids.size();
  if (p >= 1.0f || n <= 1) return;
  Scratch& s = c.scratch;
  probabilities_into(c, 1.0f, s.prob);
  s.key.resize(n);  // descending logit
  for (size_t i = 0; i < n; ++i) s.key[i] = -static_cast<double>(c.logits[c.ids[i]]);
  mass_prefix(s.key, s.prob, p, /*strict=*/false, s);
  keep_marked(c, s.keep);
}

void min_p(Candidates& c, float p) {
  if (p <= 0.0f || c.ids.size() <= 1) return;
  const float threshold = survivor_max(c) + std::log(p);
  std::vector<uint8_t>& keep = c.scratch.keep;
  keep.resize(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i) keep[i] = c.logits[c.ids[i]] >= threshold;
  keep_marked(c, keep);
}

bool xtc(Candidates& c, float probability, float threshold, Rng& rng) {
  if (probability <= 0.0f || c.ids.size() < 2) return false;
  if (!(rng.next_double() < probability)) return false;
  Scratch& s = c.scratch;
  probabilities_into(c, 1.0f, s.prob);
  const std::vector<double>& prob = s.prob;
  size_t n_above = 0, least = 0;
  for (size_t i = 0; i < prob.size(); ++i) {
    if (prob[i] < threshold) continue;
    if (n_above == 0 || prob[i] <= prob[least]) least = i;
    ++n_above;
  }
  if (n_above < 2) return false;
  s.keep.resize(c.ids.size());
  for (size_t i = 0; i < prob.size(); ++i) s.keep[i] = prob[i] < threshold || i == least;
  keep_marked(c, s.keep);
  return true;
}

void mirostat_v1(Candidates& c, float mu, int32_t m, int32_t n_vocab) {
  const size_t n = c.ids.size();
  if (n <= 1) return;
  Scratch& s = c.scratch;
  probabilities_into(c, 1.0f, s.prob);
  gather_logits(c, s.lv);
  const ByLogitDesc better{s.lv.data()};
  std::vector<uint32_t>& order = s.pos;
  iota_positions(order, n);
  // Least-squares fit of log(p_i / p_i+1) = s * log((i+2) / (i+1)) over the top m tokens
  // (a Zipf law p_i ~ i^-s).
  const size_t m_used = std::min<size_t>(n, static_cast<size_t>(std::max(m, 1)));
  std::partial_sort(order.begin(), order.begin() + m_used, order.end(), better);
  double sum_tb = 0.0, sum_tt = 0.0;
  for (size_t i = 0; i + 1 < m_used; ++i) {
    const double hi = s.prob[order[i]], lo = s.prob[order[i + 1]];
    if (lo <= 0.0) break;  // underflow: the rest carries no mass
    const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
    sum_tb += t * std::log(hi / lo);
    sum_tt += t * t;
  }
  const double zipf = sum_tt > 0.0 ? sum_tb / sum_tt : 1.0;  // no estimate: assume s = 1
  const double eps = zipf - 1.0;
  const double big_n = std::max(2.0, static_cast<double>(n_vocab));
  // k = (eps * 2^mu / (1 - N^-eps))^(1/s); as eps -> 0 the ratio tends to 2^mu / ln N.
  const double two_mu = std::exp2(static_cast<double>(mu));
  const double ratio = std::fabs(eps) < 1e-6 ? two_mu / std::log(big_n)
                                             : eps * two_mu / (1.0 - std::pow(big_n, -eps));
  double k = std::pow(ratio, 1.0 / zipf);
  if (!(k >= 1.0)) k = 1.0;  // also catches NaN
  const size_t n_keep = k >= static_cast<double>(n) ? n : static_cast<size_t>(k);
  if (n_keep < n) std::nth_element(order.begin(), order.begin() + n_keep, order.end(), better);
  s.keep.assign(n, 0);
  for (size_t i = 0; i < n_keep; ++i) s.keep[order[i]] = 1;
  keep_marked(c, s.keep);
}

void mirostat_v2(Candidates& c, float mu) {
  const size_t n = c.ids.size();
  if (n <= 1) return;
  Scratch& s = c.scratch;
  probabilities_into(c, 1.0f, s.prob);
  s.keep.resize(n);
  size_t n_keep = 0;
  for (size_t i = 0; i < n; ++i) {
    s.keep[i] = s.prob[i] > 0.0 && -std::log2(s.prob[i]) <= mu;
    n_keep += s.keep[i];
  }
  if (n_keep == 0) {  // the top token alone (the first of equals)
    s.keep[std::max_element(s.prob.begin(), s.prob.end()) - s.prob.begin()] = 1;
  }
  keep_marked(c, s.keep);
}

float mirostat_update(float mu, float surprise, float tau, float eta) {
  return mu - eta * (surprise - tau);
}

float dynamic_temperature(const Candidates& c, float temp, float range, float exponent) {
  if (range <= 0.0f || c.ids.size() <= 1) return temp;
  // With w_i = exp(l_i - max) and Z their sum, p_i = w_i / Z and -ln p_i = ln Z - (l_i - max):
  // H = ln Z - sum w_i (l_i - max) / Z, one log per row instead of one per survivor.
  std::vector<double>& w = c.scratch.prob;
  float max;
  const double z = weights(c, 1.0f, w, max);
  double dot = 0.0;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0.0) dot += w[i] * (static_cast<double>(c.logits[c.ids[i]]) - max);
  const double entropy = std::log(z) - dot / z;
  const double spread = std::clamp(entropy / std::log(static_cast<double>(w.size())), 0.0, 1.0);
  const double lo = std::max(0.0, static_cast<double>(temp) - range), hi = static_cast<double>(temp) + range;
  return static_cast<float>(lo + (hi - lo) * std::pow(spread, static_cast<double>(exponent)));
}

int32_t draw(const Candidates& c, float temp, Rng& rng) {
  MINFER_ASSERT(!c.ids.empty());
  std::vector<double>& w = c.scratch.prob;
  const double total = weights(c, temp, w);
  const double target = rng.next_double() * total;
  double cum = 0.0;
  size_t last = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0) continue;
    cum += w[i];
    last = i;
    if (target < cum) return c.ids[i];
  }
  return c.ids[last];  // rounding: target landed on the total
}

}  // namespace sampling
}  // namespace minfer
