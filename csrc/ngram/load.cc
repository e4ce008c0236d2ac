#include "ngram/load.h"

#include "ngram/arpa.h"
#include "ngram/binary.h"

namespace dl {

std::shared_ptr<NgramLM> LoadNgramFile(const std::string& path, bool copy) {
  if (IsBinaryLm(path)) return LoadBinary(path, copy);
  return std::shared_ptr<NgramLM>(ReadArpaFile(path));
}

std::shared_ptr<NgramLM> LoadNgramText(std::string_view arpa_text, const std::string& name) {
  return std::shared_ptr<NgramLM>(ReadArpa(arpa_text, name));
}

std::shared_ptr<NgramLM> LoadNgramStream(ByteSource* source, const std::string& name) {
  return std::shared_ptr<NgramLM>(ReadArpa(source, name));
}

void TokenScores(const TokenLm& lm, const int32_t* tokens, size_t n, const int32_t* context,
                 size_t context_n, bool bos, bool eos, std::vector<double>* out) {
  out->clear();
  out->reserve(n + 1);
  LmState state = lm.Start(context, context_n, bos);
  for (size_t i = 0; i < n; ++i) out->push_back(lm.ScoreToken(state, tokens[i], &state));
  if (eos) out->push_back(lm.ScoreEos(state, &state));
}

}  // namespace dl
