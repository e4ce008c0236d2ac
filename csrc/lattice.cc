#include "lattice.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "errors.h"
#include "head_topk.h"

namespace dl {
namespace {

// Sorts the candidates of one head: log-probability descending, then token id ascending.
void SortHead(int32_t* tokens, float* logprobs, int k) {
  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (logprobs[a] != logprobs[b]) return logprobs[a] > logprobs[b];
    return tokens[a] < tokens[b];
  });
  std::vector<int32_t> sorted_tokens(k);
  std::vector<float> sorted_logprobs(k);
  for (int i = 0; i < k; ++i) {
    sorted_tokens[i] = tokens[order[i]];
    sorted_logprobs[i] = logprobs[order[i]];
  }
  std::copy(sorted_tokens.begin(), sorted_tokens.end(), tokens);
  std::copy(sorted_logprobs.begin(), sorted_logprobs.end(), logprobs);
}

std::string EscapeDot(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Lattice Lattice::FromLogits(const float* logits, int h, int vocab, int k, float temperature) {
  if (h < 1) throw InvalidArgument(Message("logits must have at least one head, got h=", h));
  if (vocab < 1)
    throw InvalidArgument(Message("logits must have a non-empty vocabulary, got V=", vocab));
  Lattice lattice;
  lattice.h = h;
  lattice.k = k;
  lattice.tokens.resize(static_cast<size_t>(h) * std::max(k, 0));
  lattice.logprobs.resize(static_cast<size_t>(h) * std::max(k, 0));
  // -inf is a masked token (probability 0, as transformers' masks write it); NaN and +inf are
  // errors. At least k tokens per head must be unmasked so every lattice arc is a real token.
  TopkLogprobs(logits, h, vocab, k, temperature, lattice.tokens.data(), lattice.logprobs.data());
  for (int t = 0; t < h; ++t) {
    if (lattice.logprobs[static_cast<size_t>(t) * k + k - 1] == -INFINITY) {
      const float* row = logits + static_cast<size_t>(t) * vocab;
      const auto unmasked = std::count_if(row, row + vocab, [](float x) { return x > -INFINITY; });
      throw InvalidArgument(Message("head ", t, " has ", unmasked,
                                    " tokens with a logit above -inf, fewer than k=", k));
    }
  }
  return lattice;
}

Lattice Lattice::FromTopk(const int32_t* tokens, const float* logprobs, int h, int k,
                          int64_t vocab_size) {
  if (h < 1) throw InvalidArgument(Message("top-k arrays must have at least one head, got h=", h));
  if (k < 1) throw InvalidArgument(Message("k must be >= 1, got k=", k));
  if (vocab_size == 0 || vocab_size < -1)  // -1: no limit
    throw InvalidArgument(Message("vocab_size must be >= 1, got vocab_size=", vocab_size));
  Lattice lattice;
  lattice.h = h;
  lattice.k = k;
  lattice.tokens.assign(tokens, tokens + static_cast<size_t>(h) * k);
  lattice.logprobs.assign(logprobs, logprobs + static_cast<size_t>(h) * k);
  std::unordered_set<int32_t> seen;
  for (int t = 0; t < h; ++t) {
    seen.clear();
    for (int i = 0; i < k; ++i) {
      const int32_t token = lattice.token(t, i);
      const float logprob = lattice.logprob(t, i);
      if (token < 0)
        throw InvalidArgument(Message("negative token id ", token, " at head ", t, " column ", i));
      if (vocab_size >= 0 && token >= vocab_size)
        throw InvalidArgument(Message("unknown token id ", token, ": vocab_size=", vocab_size));
      if (!seen.insert(token).second)
        throw InvalidArgument(Message("token ", token, " appears twice in head ", t));
      if (!std::isfinite(logprob) || logprob > 0)
        throw InvalidArgument(Message("log-probabilities must be finite and <= 0: head ", t,
                                      " column ", i, " is ", logprob));
    }
    SortHead(lattice.tokens.data() + static_cast<size_t>(t) * k,
             lattice.logprobs.data() + static_cast<size_t>(t) * k, k);
  }
  return lattice;
}

std::string Lattice::ToFstText() const {
  std::ostringstream out;
  out.precision(9);
  for (int t = 0; t < h; ++t)
    for (int i = 0; i < k; ++i) {
      const int64_t label = static_cast<int64_t>(token(t, i)) + 1;
      out << t << '\t' << t + 1 << '\t' << label << '\t' << label << '\t' << -logprob(t, i) << '\n';
    }
  out << h << '\n';
  return out.str();
}

std::string Lattice::ToDot(const std::vector<std::string>& words) const {
  std::ostringstream out;
  out.precision(4);
  out << "digraph lattice {\n  rankdir=LR;\n  node [shape=circle];\n";
  out << "  " << h << " [shape=doublecircle];\n";
  for (int t = 0; t < h; ++t)
    for (int i = 0; i < k; ++i) {
      const int32_t tok = token(t, i);
      std::string name =
          (tok >= 0 && static_cast<size_t>(tok) < words.size()) ? words[tok] : std::to_string(tok);
      out << "  " << t << " -> " << t + 1 << " [label=\"" << EscapeDot(name) << " ("
          << logprob(t, i) << ")\"];\n";
    }
  out << "}\n";
  return out.str();
}

}  // namespace dl
