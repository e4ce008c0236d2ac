// LineReader: the lines of a ByteSource, one at a time, with a bound on their length, so that
// reading holds one block plus one line whatever the input (a decompression bomb of one endless
// line is refused after max_line bytes, not held whole). Lines end at '\n'; a '\r' before it is
// dropped (CRLF); the last line may lack its '\n'.
// A line returned by Next stays valid until the next call. Errors: FormatError
// "NAME:LINE: problem" (Fail, and a line longer than max_line bytes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "errors.h"
#include "ngram/byte_source.h"

namespace dl {

class LineReader {
 public:
  // Reads start at kFirstBlock bytes and double up to kBlock: a small input costs little.
  static constexpr size_t kFirstBlock = size_t{1} << 16;
  static constexpr size_t kBlock = size_t{1} << 20;

  LineReader(ByteSource* source, const std::string& name, size_t max_line);

  // Next line without its terminator; false (and an empty line) at the end of the input.
  bool Next(std::string_view* line);
  // Next line that is not blank (whitespace only); false at the end.
  bool NextNonBlank(std::string_view* line);
  template <typename... Parts>
  [[noreturn]] void Fail(const Parts&... parts) const {
    throw FormatError(Message(name_, ":", line_no_, ": ", parts...));
  }
  size_t line_no() const { return line_no_; }
  const std::string& name() const { return name_; }

 private:
  // Reads another block after the unread bytes; false at the end of the input.
  bool Refill();

  ByteSource* source_;
  const std::string& name_;
  size_t max_line_;
  std::vector<char> buffer_;
  size_t begin_ = 0;  // unread bytes: buffer_[begin_, end_)
  size_t end_ = 0;
  size_t scanned_ = 0;          // bytes after begin_ known to hold no '\n'
  size_t block_ = kFirstBlock;  // bytes the next Refill asks for
  bool at_end_ = false;
  size_t line_no_ = 0;
};

}  // namespace dl
