// The trainer's BackoffModel as an NgramLM (and so as a .dlm file) without a text round trip.
//
// Every listed n-gram keeps the trainer's value rounded once to the engine's float: prob_ln =
// float(ln p), backoff_ln = float(ln alpha), 0 where the n-gram is no context (NaN backoff);
// <s> gets ARPA's -99 (log10), as the ARPA writer prints it. Writing ARPA text instead rounds
// log10 values to a few digits first (arpa_writer.h). Cost: O(n-grams * order) plus the table
// build of NgramBuilder.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmbuild/model.h"
#include "ngram/ngram_lm.h"

namespace dl::lmbuild {

// `metadata`: "# key: value" pairs the model keeps (e.g. the tokenizer's sha256).
std::unique_ptr<NgramLM> ToNgramLM(
    const BackoffModel& model, const std::vector<std::pair<std::string, std::string>>& metadata);

// ln p of n-gram i of order k as the engine stores it (see above), in double.
double StoredProbLn(const BackoffModel& model, int k, uint32_t i);

}  // namespace dl::lmbuild
