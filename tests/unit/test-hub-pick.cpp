// Which GGUF a hf: name picks (hub/gguf-pick.h), on the repository layouts of llama.cpp's
// tests/test-model-resolution.cpp (the primary model and its parts; sidecars are not models
// here) plus our own, in every listing order where the answer must not depend on it; and URL
// resolution for redirects (hub/url.h); and hf: without a tag when the Hub is out of reach: the
// same default-file rule over the cached files, said on stderr, with no backoff (hub/hf-hub.h).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hub/gguf-pick.h"
#include "hub/hf-cache.h"
#include "hub/hf-hub.h"
#include "hub/ollama.h"
#include "hub/url.h"

using namespace minfer::hub;

namespace {

using Files = std::vector<std::string>;

const Files kFlat = {"README.md", "model-BF16.gguf", "model-Q4_K_M.gguf", "model-Q8_0.gguf", "mmproj-model-BF16.gguf",
                     "mmproj-model-Q8_0.gguf", "mtp-model-BF16.gguf", "mtp-model-Q4_0.gguf", "mtp-model-Q8_0.gguf",
                     "dflash-model-BF16.gguf", "dflash-model-Q8_0.gguf"};
const Files kSubdir = {"mmproj-model-f16.gguf", "model-mtp-BF16.gguf", "model-mtp-Q8_0.gguf",
                       "Q3_K_M/model-Q3_K_M-00001-of-00003.gguf", "Q3_K_M/model-Q3_K_M-00002-of-00003.gguf",
                       "Q3_K_M/model-Q3_K_M-00003-of-00003.gguf", "Q8_0/model-Q8_0-00001-of-00002.gguf",
                       "Q8_0/model-Q8_0-00002-of-00002.gguf"};
const Files kHole = {"model-BF16.gguf", "model-Q4_K_M.gguf", "model-Q8_0.gguf", "mtp-model-BF16.gguf",
                     "mtp-model-Q4_0.gguf", "mtp-model-Q8_0.gguf", "dflash-model-BF16.gguf", "dflash-model-Q8_0.gguf"};
const Files kUnsloth = {"model-UD-Q8_K_XL.gguf", "mmproj-BF16.gguf", "model-MTP-BF16.gguf"};
const Files kVendors = {"TheDrummer_Model-24B-v4.1-Q8_0.gguf", "BlackSheep-24B.Q8_0.gguf"};
const Files kQuad = {"model-Q8_0.gguf", "mtp-model-Q8_0.gguf", "dflash-model-Q8_0.gguf", "eagle3-model-Q8_0.gguf",
                     "dspark-model-Q8_0.gguf"};
const Files kSpark = {"README.md", "model-MXFP4.gguf", "dspark-model-BF16.gguf", "dspark-model-MXFP4.gguf"};
const Files kOurs = {"imatrix.gguf", "x-Q4_K_M_L.gguf", "x-q4_k_m.gguf", "x-Q4_K.gguf", "x.IQ4_XS.gguf",
                     "sub/y-Q5_K_S-00002-of-00002.gguf", "sub/y-Q5_K_S-00001-of-00002.gguf", "broken-Q6_K-00001-of-00002.gguf"};

const Files kNoDefault = {"imatrix-Q8_0.gguf", "b-IQ4_XS.gguf", "a-Q6_K.gguf"};

struct Case {
  const char* name;
  const Files* files;
  std::string tag;
  bool order_dependent;
  Files want;  // empty: no model picked
};

const Case kCases[] = {
    {"flat exact tag", &kFlat, "Q8_0", false, {"model-Q8_0.gguf"}},
    {"flat default", &kFlat, "", false, {"model-Q4_K_M.gguf"}},
    // llama.cpp takes the first model in listing order here (model-MTP-BF16 in another order);
    // a draft head is never a model for us, whatever its case, so the order does not matter.
    {"unsloth fallback", &kUnsloth, "", false, {"model-UD-Q8_K_XL.gguf"}},
    {"flat hf_file", &kFlat, "model-BF16.gguf", false, {"model-BF16.gguf"}},
    {"flat missing hf_file", &kFlat, "nope.gguf", false, {}},
    {"subdir shards", &kSubdir, "Q3_K_M", false,
     {"Q3_K_M/model-Q3_K_M-00001-of-00003.gguf", "Q3_K_M/model-Q3_K_M-00002-of-00003.gguf",
      "Q3_K_M/model-Q3_K_M-00003-of-00003.gguf"}},
    {"subdir default", &kSubdir, "", false, {"Q8_0/model-Q8_0-00001-of-00002.gguf", "Q8_0/model-Q8_0-00002-of-00002.gguf"}},
    {"hole tag alone", &kHole, "Q4_0", false, {}},
    {"hole default anchor", &kHole, "", false, {"model-Q4_K_M.gguf"}},
    {"unsloth suffix", &kUnsloth, "Q8_K_XL", false, {"model-UD-Q8_K_XL.gguf"}},
    {"vendor prefix", &kVendors, "Q8_0", true, {"TheDrummer_Model-24B-v4.1-Q8_0.gguf"}},
    {"quad exact tag", &kQuad, "Q8_0", false, {"model-Q8_0.gguf"}},
    {"spark default anchor", &kSpark, "", false, {"model-MXFP4.gguf"}},
    {"spark tag sidecar", &kSpark, "BF16", false, {}},
    // Ours: the tag ends at '.' or '-', any case; imatrix is not a model; a split with a missing part is an error.
    {"tag ends at a separator", &kOurs, "Q4_K_M", false, {"x-q4_k_m.gguf"}},
    {"shorter tag", &kOurs, "q4_k", false, {"x-Q4_K.gguf"}},
    {"dot before tag", &kOurs, "IQ4_XS", false, {"x.IQ4_XS.gguf"}},
    {"split in a folder, parts out of order", &kOurs, "Q5_K_S", false,
     {"sub/y-Q5_K_S-00001-of-00002.gguf", "sub/y-Q5_K_S-00002-of-00002.gguf"}},
    {"later part by file name", &kOurs, "sub/y-Q5_K_S-00002-of-00002.gguf", false,
     {"sub/y-Q5_K_S-00001-of-00002.gguf", "sub/y-Q5_K_S-00002-of-00002.gguf"}},
    {"split missing a part", &kOurs, "Q6_K", false, {}},
    {"no tag, no default: first model in the listing", &kNoDefault, "", true, {"b-IQ4_XS.gguf"}},
    {"no tag: Q4_K_M, any case", &kOurs, "", false, {"x-q4_k_m.gguf"}},
};

}  // namespace

TEST(HubPick, LlamaCppResolutionCasesInEveryOrder) {
  for (const Case& c : kCases) {
    const size_t n_orders = c.order_dependent ? 1 : c.files->size();
    for (size_t rot = 0; rot < n_orders; ++rot) {
      Files files = *c.files;
      std::rotate(files.begin(), files.begin() + static_cast<long>(rot), files.end());
      if (rot % 2 == 1) std::reverse(files.begin(), files.end());
      auto pick = pick_gguf(files, c.tag);
      SCOPED_TRACE(std::string(c.name) + ", order " + std::to_string(rot));
      if (c.want.empty()) {
        EXPECT_FALSE(pick) << "picked " << (pick ? pick->files[0] : "");
        continue;
      }
      ASSERT_TRUE(pick) << pick.error().message;
      EXPECT_EQ(pick->files, c.want);
    }
  }
}

TEST(HubPick, ErrorsNameWhatIsThere) {
  auto p = pick_gguf(kHole, "Q4_0");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("'Q4_0'"), std::string::npos);
  EXPECT_NE(p.error().message.find("model-BF16.gguf"), std::string::npos);
  EXPECT_EQ(p.error().message.find("mtp-model-Q4_0.gguf"), std::string::npos);
  auto s = pick_gguf(kOurs, "Q6_K");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("broken-Q6_K-00002-of-00002.gguf' is missing"), std::string::npos) << s.error().message;
}

TEST(HubPick, SplitNames) {
  GgufSplitName s = gguf_split_name("Q3_K_M/model-Q3_K_M-00002-of-00003.gguf");
  EXPECT_TRUE(s.is_gguf);
  EXPECT_EQ(s.prefix, "Q3_K_M/model-Q3_K_M");
  EXPECT_EQ(s.tag, "Q3_K_M");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  s = gguf_split_name("BlackSheep-24B.q8_0.gguf");
  EXPECT_EQ(s.tag, "Q8_0");
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(gguf_split_name("plain.gguf").tag, "");
  EXPECT_FALSE(gguf_split_name("README.md").is_gguf);
}

TEST(HubNames, ParseHfAndOllama) {
  auto a = parse_hf_name("hf:org/repo");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->repo_id, "org/repo");
  EXPECT_EQ(a->revision, "main");
  EXPECT_EQ(a->tag, "");
  auto b = parse_hf_name("hf:org/repo@v1.0:dir/x-Q4_0.gguf");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->revision, "v1.0");
  EXPECT_EQ(b->tag, "dir/x-Q4_0.gguf");
  EXPECT_EQ(b->text(), "hf:org/repo@v1.0:dir/x-Q4_0.gguf");
  for (const char* bad : {"hf:", "hf:repo", "hf:a/b/c", "hf:a/..", "hf:a/b:../x.gguf", "hf:a/b@:Q4", "hf:a b/c", "hf:a/b@/tmp/x", "hf:a/b:", "hf:a/b:/abs.gguf"})
    EXPECT_FALSE(parse_hf_name(bad)) << bad;
  auto o = parse_ollama_name("ollama:qwen2.5:0.5b");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->ns, "library");
  EXPECT_EQ(o->model, "qwen2.5");
  EXPECT_EQ(o->tag, "0.5b");
  auto d = parse_ollama_name("ollama:user/m");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tag, "latest");
  EXPECT_EQ(d->text(), "ollama:user/m:latest");
  for (const char* bad : {"ollama:", "ollama:a/b/c", "ollama:../x", "ollama:m:", "ollama:m:a/b"})
    EXPECT_FALSE(parse_ollama_name(bad)) << bad;
}

TEST(HubUrl, OriginsAndRedirects) {
  EXPECT_EQ(url_origin("https://huggingface.co/x"), (Origin{"https", "huggingface.co", 443}));
  EXPECT_EQ(url_origin("HTTP://Host:8080"), (Origin{"http", "host", 8080}));
  EXPECT_EQ(url_origin("http://user:pw@127.0.0.2:99/p?q"), (Origin{"http", "127.0.0.2", 99}));
  EXPECT_FALSE(url_origin("https://hub/x") == url_origin("https://cdn-lfs.hub/x"));
  EXPECT_FALSE(url_origin("http://h:1/") == url_origin("http://h:2/"));
  EXPECT_EQ(url_resolve("https://h/a/b?q", "https://cdn/x"), "https://cdn/x");
  EXPECT_EQ(url_resolve("https://h/a/b?q", "//cdn/x"), "https://cdn/x");
  EXPECT_EQ(url_resolve("https://h:8/a/b?q", "/c?d"), "https://h:8/c?d");
  EXPECT_EQ(url_resolve("https://h/a/b?q", "c"), "https://h/a/c");
  EXPECT_EQ(url_escape_path("dir/a b+c.gguf"), "dir/a%20b%2Bc.gguf");
}

namespace {

// A loopback port that nothing listens on (bound, then closed): connections are refused.
int refused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A hub cache in a temporary folder holding `files` of org/repo at one commit, and the Hub's
// endpoint on a refused port; the environment is restored afterwards.
class HubOffline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("minfer-hub-offline-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    set("HF_HUB_CACHE", dir_.string());
    set("HF_ENDPOINT", "http://127.0.0.1:" + std::to_string(refused_port()));
    set("MINFER_HTTP_RETRY_MS", "1000");  // a retry loop would show in the time taken
    ::unsetenv("HF_HUB_OFFLINE");
  }
  void TearDown() override {
    for (auto& [name, value] : saved_)
      value ? (void)::setenv(name.c_str(), value->c_str(), 1) : (void)::unsetenv(name.c_str());
    std::filesystem::remove_all(dir_);
  }
  void set(const std::string& name, const std::string& value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void cache(const std::vector<std::string>& files) {
    const std::string commit(40, 'c');
    for (const std::string& f : files) {
      const std::string etag = std::string(63, '0') + std::to_string(&f - files.data());
      std::filesystem::create_directories(std::filesystem::path(hf_blob_path("org/repo", etag)).parent_path());
      std::ofstream(hf_blob_path("org/repo", etag)) << "GGUF" << f;
      ASSERT_TRUE(hf_link_snapshot("org/repo", commit, f, etag).is_ok());
    }
    ASSERT_TRUE(hf_write_ref("org/repo", "main", commit).is_ok());
  }
  // The file hf_resolve gives for `name` and what it said on stderr.
  std::pair<std::string, std::string> resolve(const std::string& name) {
    ::testing::internal::CaptureStderr();
    auto r = hf_resolve(*parse_hf_name(name), /*allow_network=*/true);
    const std::string err = ::testing::internal::GetCapturedStderr();
    if (!r) return {"error: " + r.error().message, err};
    return {std::filesystem::path(r->paths.front()).filename().string(), err};
  }

 private:
  std::filesystem::path dir_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_F(HubOffline, NoTagUsesTheDefaultRuleOverTheCachedFilesAndSaysSo) {
  cache({"model-BF16.gguf", "model-Q8_0.gguf", "mmproj-model-Q8_0.gguf"});
  const auto t0 = std::chrono::steady_clock::now();
  auto [file, err] = resolve("hf:org/repo");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "no backoff when refused";
  EXPECT_EQ(file, "model-Q8_0.gguf");
  EXPECT_NE(err.find("hf:org/repo: the Hub is unreachable; using the cached model-Q8_0.gguf by the default-file rule "
                     "over cached files"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("retrying"), std::string::npos) << err;

  ::setenv("HF_HUB_OFFLINE", "1", 1);  // no request at all, and the same rule
  std::tie(file, err) = resolve("hf:org/repo");
  EXPECT_EQ(file, "model-Q8_0.gguf");
  EXPECT_NE(err.find("HF_HUB_OFFLINE is set; using the cached model-Q8_0.gguf"), std::string::npos) << err;

  // A tag names one file: the cache answers, nothing to say.
  std::tie(file, err) = resolve("hf:org/repo:BF16");
  EXPECT_EQ(file, "model-BF16.gguf");
  EXPECT_EQ(err, "");
}

TEST_F(HubOffline, TheRuleOverTheCacheIsTheRuleOverTheListing) {
  cache({"a-Q8_0.gguf", "b-Q4_K_M.gguf"});
  EXPECT_EQ(resolve("hf:org/repo").first, "b-Q4_K_M.gguf");
  EXPECT_EQ(resolve("hf:org/repo").first, pick_gguf({"a-Q8_0.gguf", "b-Q4_K_M.gguf"}, "")->files.front());
}
