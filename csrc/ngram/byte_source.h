// ByteSource: where text comes from, read in blocks, so that a parser holds one block and one
// line instead of the whole input. Sources: a buffer in memory, a file (streamed), or anything a
// caller implements (the bindings read a Python stream, e.g. a bounded decompressor).
// size() is the total when known up front (a buffer, a regular file), so a parser can check a
// header's claims against it; a stream (decompressed data) does not know it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace dl {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Copies up to `n` (> 0) bytes to `out`; returns how many, 0 only at the end of the input.
  // Throws on a read error.
  virtual size_t Read(char* out, size_t n) = 0;
  // Total bytes, when known before reading.
  virtual std::optional<uint64_t> size() const { return std::nullopt; }
};

// A buffer that outlives the source.
class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view text) : text_(text) {}
  size_t Read(char* out, size_t n) override;
  std::optional<uint64_t> size() const override { return text_.size(); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// A file read front to back. FileError (errno, path) when it cannot be opened or read.
class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  size_t Read(char* out, size_t n) override;
  std::optional<uint64_t> size() const override { return size_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::optional<uint64_t> size_;  // known for a regular file
};

}  // namespace dl
