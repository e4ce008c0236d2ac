// ARPA reader: text of an ARPA backoff model (KenLM lmplz, SRILM, OpenGrm NGram) -> NgramLM.
//
// Accepts: "# key: value" metadata lines (and any other text) before \data\; orders 1..kMaxOrder;
// missing backoff fields (= 0); pruned models whose lower-order n-grams or backoffs are missing
// (blank context entries are added for missing prefixes); -99 / -inf probabilities; CRLF.
// Converts log10 to natural log and hands the n-grams to NgramBuilder (builder.h), which lays out
// the model. Every n-gram word must have a 1-gram.
// Errors: FormatError "NAME:LINE: problem" for an empty file, missing \data\ / section headers /
// \end\, header counts that disagree with the sections, unparsable numbers, wrong field counts,
// words without a 1-gram, duplicate n-grams, unsupported orders.
// Complexity: O(bytes + sum over n-grams of order^2) time; memory ~ 24 bytes per n-gram.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ngram/ngram_lm.h"

namespace dl {

// Parses ARPA text; `name` (usually the path) prefixes error messages.
std::unique_ptr<NgramLM> ReadArpa(std::string_view text, const std::string& name);
// Reads and parses an uncompressed ARPA file.
std::unique_ptr<NgramLM> ReadArpaFile(const std::string& path);

}  // namespace dl
