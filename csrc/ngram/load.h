// Opening a model file of either format, and whole-sequence scoring helpers over a TokenLm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ngram/byte_source.h"
#include "ngram/token_lm.h"

namespace dl {

// A binary model (recognised by its magic) or an uncompressed ARPA file. `copy`: read a binary
// model into private memory instead of mapping it (LoadBinary); ARPA models always are.
std::shared_ptr<NgramLM> LoadNgramFile(const std::string& path, bool copy = false);
// ARPA text already in memory; `name` labels errors.
std::shared_ptr<NgramLM> LoadNgramText(std::string_view arpa_text, const std::string& name);
// ARPA text read from a stream (e.g. decompressed by the caller as it is read).
std::shared_ptr<NgramLM> LoadNgramStream(ByteSource* source, const std::string& name);

// Natural-log probability of each token of `tokens` given "<s>"? + `context`, plus </s> at the end
// when `eos` (so `out` gets n or n + 1 values). Tokens must have passed CheckTokens.
void TokenScores(const TokenLm& lm, const int32_t* tokens, size_t n, const int32_t* context,
                 size_t context_n, bool bos, bool eos, std::vector<double>* out);

}  // namespace dl
