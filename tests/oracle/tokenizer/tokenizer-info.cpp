// tokenizer-info MODEL -> {"n_vocab":N,"bos":B,"eos":E,"eot":T,"add_bos":b,"add_eos":b,"fim":[pre,suf,mid,pad,rep,sep],"eog":[ids...]}
// The same fields as `llama-oracle vocab-info`, from our Tokenizer, for test_tokenizer_vs_hf.py.
#include <cstdio>
#include <string>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tokenizer-info MODEL\n");
    return 1;
  }
  auto file = minfer::GgufFile::open(argv[1]);
  if (!file) {
    std::fprintf(stderr, "tokenizer-info: %s\n", file.error().message.c_str());
    return 1;
  }
  auto tok = minfer::Tokenizer::from_gguf(*file);
  if (!tok) {
    std::fprintf(stderr, "tokenizer-info: %s\n", tok.error().message.c_str());
    return 1;
  }
  std::string eog;
  for (int32_t id : tok->eog_ids()) eog.append(eog.empty() ? "" : ",").append(std::to_string(id));
  std::string fim;
  for (int k = 0; k < 6; ++k)
    fim.append(k ? "," : "").append(std::to_string(tok->fim_id(static_cast<minfer::Tokenizer::Fim>(k))));
  std::printf("{\"n_vocab\":%d,\"bos\":%d,\"eos\":%d,\"eot\":%d,\"add_bos\":%s,\"add_eos\":%s,\"fim\":[%s],\"eog\":[%s]}\n",
              tok->n_vocab(), tok->bos_id(), tok->eos_id(), tok->eot_id(), tok->add_bos() ? "true" : "false",
              tok->add_eos() ? "true" : "false", fim.c_str(), eog.c_str());
  return 0;
}
