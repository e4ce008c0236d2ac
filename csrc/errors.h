// Error types shared by the whole core.
//
// Every error that bad user input can cause is one of these, carrying the offending
// values (and, for files, the path and line) in its message. The bindings translate
// InvalidArgument to Python's ValueError and FormatError to draftlattice.FormatError
// (a ValueError subclass). Nothing in the core asserts on user input.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace dl {

// A parameter or array given by the caller is impossible (shape, range, NaN, ...).
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A file (ARPA, binary LM, corpus, trace) is malformed, truncated or corrupted.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds a message from streamable pieces: Message("k=", k, " > V=", v).
template <typename... Parts>
std::string Message(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace dl
