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
// The text is read as a stream of lines (line_reader.h): at most kMaxArpaLineBytes per line, so a
// parse holds one block and one line of text besides the model, whatever the input.
// Header counts are checked against the text's size when it is known (a file, a buffer): more
// n-grams than its bytes can hold is refused before anything is allocated. A stream (decompressed
// text) has no size up front: its tables are allocated for at most a fixed number of entries and
// grow with the n-grams actually read, so a lying header costs no memory either.
// Complexity: O(bytes + sum over n-grams of order^2) time; memory ~ 24 bytes per n-gram.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "ngram/byte_source.h"
#include "ngram/ngram_lm.h"

namespace dl {

// The longest ARPA line accepted (a 1-gram's word, a metadata line): 16 MiB.
constexpr size_t kMaxArpaLineBytes = size_t{1} << 24;

// Parses ARPA text read from `source`; `name` (usually the path) prefixes error messages.
std::unique_ptr<NgramLM> ReadArpa(ByteSource* source, const std::string& name);
// Parses ARPA text in memory.
std::unique_ptr<NgramLM> ReadArpa(std::string_view text, const std::string& name);
// Reads and parses an uncompressed ARPA file (streamed).
std::unique_ptr<NgramLM> ReadArpaFile(const std::string& path);

}  // namespace dl
