// Oracle draft of a lattice given the reference continuation (e.g. the target's greedy tokens).
//
// The oracle follows the reference while reference[t] is among head t's k candidates, then
// continues with the top-1 candidate of every later head. Its accepted length is the number of
// leading positions where it equals the reference (the best any path of the lattice can reach
// under greedy verification). Cost: O(h * k).
#pragma once

#include <cstdint>
#include <vector>

#include "errors.h"
#include "lattice.h"

namespace dl {

struct OracleDraft {
  std::vector<int32_t> tokens;  // [h]
  int accepted = 0;             // leading positions equal to the reference
};

inline OracleDraft BestOracleDraft(const Lattice& lattice, const int32_t* reference, size_t size) {
  if (size != static_cast<size_t>(lattice.h))
    throw InvalidArgument(
        Message("reference has ", size, " tokens but the lattice has h=", lattice.h));
  for (size_t t = 0; t < size; ++t)
    if (reference[t] < 0)
      throw InvalidArgument(
          Message("reference[", t, "] = ", reference[t], " is negative; token ids are >= 0"));
  OracleDraft out;
  out.tokens.resize(lattice.h);
  bool following = true;
  for (int t = 0; t < lattice.h; ++t) {
    int chosen = 0;
    if (following) {
      following = false;
      for (int r = 0; r < lattice.k; ++r)
        if (lattice.token(t, r) == reference[t]) {
          chosen = r;
          following = true;
          break;
        }
      if (following) ++out.accepted;
    }
    out.tokens[t] = lattice.token(t, chosen);
  }
  return out;
}

}  // namespace dl
