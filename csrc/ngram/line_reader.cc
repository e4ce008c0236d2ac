#include "ngram/line_reader.h"

#include <algorithm>
#include <cstring>

namespace dl {

LineReader::LineReader(ByteSource* source, const std::string& name, size_t max_line)
    : source_(source), name_(name), max_line_(max_line) {}

bool LineReader::Next(std::string_view* line) {
  while (true) {
    const char* start = buffer_.data() + begin_;
    const size_t unscanned = end_ - begin_ - scanned_;
    const void* nl = unscanned > 0 ? std::memchr(start + scanned_, '\n', unscanned) : nullptr;
    if (nl != nullptr || (at_end_ && end_ > begin_)) {
      size_t len = nl ? static_cast<const char*>(nl) - start : end_ - begin_;
      if (len > max_line_) break;
      begin_ += nl ? len + 1 : len;
      scanned_ = 0;
      if (len > 0 && start[len - 1] == '\r') --len;
      *line = std::string_view(start, len);
      ++line_no_;
      return true;
    }
    scanned_ = end_ - begin_;
    if (scanned_ > max_line_) break;
    if (at_end_ || !Refill()) {
      if (end_ > begin_) continue;  // the last line, without its '\n'
      *line = std::string_view();
      return false;
    }
  }
  ++line_no_;
  Fail("line is longer than ", max_line_, " bytes (not a text file of this format?)");
}

bool LineReader::NextNonBlank(std::string_view* line) {
  while (Next(line))
    if (line->find_first_not_of(" \t") != std::string_view::npos) return true;
  return false;
}

bool LineReader::Refill() {
  // Move the unread bytes (the start of a line) to the front, then read one block after them.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() < end_ + block_) buffer_.resize(end_ + block_);
  const size_t got = source_->Read(buffer_.data() + end_, block_);
  block_ = std::min(2 * block_, kBlock);
  end_ += got;
  if (got == 0) at_end_ = true;
  return got > 0;
}

}  // namespace dl
