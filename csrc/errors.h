// Error types shared by the whole core.
//
// Every error that bad user input can cause is one of these, carrying the offending
// values (and, for files, the path and line) in its message. The bindings translate them with
// the same message: InvalidArgument -> ValueError, FormatError -> draftlattice.FormatError (a
// ValueError subclass), FileError -> OSError (its errno picks the subclass, e.g.
// FileNotFoundError, FileExistsError). Nothing in the core asserts on user input.
// Files: FileError when a file cannot be opened, read or written; FormatError when its content is
// wrong.
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

// A file's content (ARPA, binary LM, corpus, trace) is malformed, truncated or corrupted.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file cannot be opened, read, written or replaced; `error_number` is the errno (0 if none).
class FileError : public std::runtime_error {
 public:
  FileError(int error_number, const std::string& message)
      : std::runtime_error(message), error_number_(error_number) {}
  int error_number() const { return error_number_; }

 private:
  int error_number_;
};

// Builds a message from streamable pieces: Message("k=", k, " > V=", v).
template <typename... Parts>
std::string Message(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace dl
