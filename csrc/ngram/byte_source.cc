#include "ngram/byte_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "errors.h"

namespace dl {

size_t MemorySource::Read(char* out, size_t n) {
  const size_t got = std::min(n, text_.size() - pos_);
  if (got > 0) std::memcpy(out, text_.data() + pos_, got);
  pos_ += got;
  return got;
}

FileSource::FileSource(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr)
    throw FileError(errno, Message(path, ": cannot open LM file: ", std::strerror(errno)));
  struct stat st{};
  if (fstat(fileno(file_), &st) == 0 && S_ISREG(st.st_mode))
    size_ = static_cast<uint64_t>(st.st_size);
}

FileSource::~FileSource() {
  if (file_ != nullptr) std::fclose(file_);
}

size_t FileSource::Read(char* out, size_t n) {
  const size_t got = std::fread(out, 1, n, file_);
  if (got == 0 && std::ferror(file_))
    throw FileError(errno, Message(path_, ": read error: ", std::strerror(errno)));
  return got;
}

}  // namespace dl
