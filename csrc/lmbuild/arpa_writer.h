// Writes a BackoffModel as ARPA text, with OpenGrm's conventions (ngramprint --ARPA):
//   - optional "# key: value" metadata lines before \data\;
//   - the unigram count includes <s>, listed as "-99 <s> backoff";
//   - log10 values with 7 significant digits; a backoff field only on n-grams that are contexts
//     (a complete state's cost 99 prints as -42.99515); none on n-grams ending in </s>;
//   - within an order, n-grams in lexicographic order of word ids (<s>, </s>, then words in order
//     of first appearance), which is NGram's depth-first order.
// Cost: O(n log n) for the ordering; writes through a large buffer.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lmbuild/model.h"

namespace dl::lmbuild {

// Throws FormatError (with the path) when the file cannot be written.
// `digits`: significant digits of the log10 values (OpenGrm prints 7; 7 digits round a log10
// value by up to 5e-7, so sums over a whole vocabulary hold only to ~1e-6; use more to keep the
// estimate's precision).
void WriteArpa(const BackoffModel& model, const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& metadata, int digits = 7);

}  // namespace dl::lmbuild
