#include "ngram/binary.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "errors.h"

namespace dl {
namespace {

using ngram::Entry;
constexpr uint32_t kEndianMarker = 0x01020304u;
constexpr uint64_t kFlagSuffixClosed = 1;
constexpr uint64_t kFlagPairBounds = 2;      // version >= 3
constexpr uint64_t kFlagExtensionMasks = 4;  // version >= 4, with kFlagPairBounds
constexpr uint64_t kKnownFlags = kFlagSuffixClosed | kFlagPairBounds | kFlagExtensionMasks;

struct BinaryHeader {
  char magic[8];
  uint32_t version;
  uint32_t endian;
  uint32_t order;
  uint32_t header_bytes;
  uint64_t file_bytes;
  uint64_t checksum;
  uint64_t vocab_size;
  uint64_t counts[kMaxOrder];
  uint64_t buckets[kMaxOrder];  // index n - 1, n >= 2
  uint64_t metadata_offset, metadata_bytes;
  uint64_t vocab_offsets_offset;
  uint64_t vocab_blob_offset, vocab_blob_bytes;
  uint64_t unigram_offset;
  uint64_t table_offset[kMaxOrder];  // index n - 1, n >= 2
  uint64_t flags;                    // version >= 2: kFlagSuffixClosed (version 1: 0)
  uint64_t word_bound_offset;        // version >= 2: float[V] (word_bound.h)
  uint64_t pair_bound_offset;        // with kFlagPairBounds: float[buckets[1]] (pair_bound.h)
  uint64_t word_slack_offset;        // with kFlagPairBounds: float[V] (pair_bound.h)
  uint64_t extension_mask_offset;    // version >= 4, with kFlagExtensionMasks: uint64[buckets[1]]
};
constexpr size_t kHeaderBytes = sizeof(BinaryHeader);
// Versions 1 to 3 end before extension_mask_offset.
constexpr size_t kHeaderBytesV3 = offsetof(BinaryHeader, extension_mask_offset);
static_assert(kHeaderBytes % 8 == 0 && kHeaderBytesV3 % 8 == 0,
              "header must keep 8-byte alignment");
size_t HeaderBytes(uint32_t version) { return version >= 4 ? kHeaderBytes : kHeaderBytesV3; }

uint64_t Pad8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

class Writer {
 public:
  uint64_t Append(const void* data, size_t bytes) {
    const uint64_t at = buffer_.size();
    buffer_.resize(Pad8(at + bytes), 0);
    if (bytes) std::memcpy(buffer_.data() + at, data, bytes);
    return at;
  }
  std::vector<char>& buffer() { return buffer_; }

 private:
  std::vector<char> buffer_;
};

struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (addr) munmap(addr, bytes);
  }
};

// A private copy of the file (LoadBinary with copy): uint64_t words keep the 8-byte alignment
// the sections need.
struct Copy {
  std::unique_ptr<uint64_t[]> words;
};

}  // namespace

uint64_t FileChecksum(const char* file, uint64_t bytes);

uint64_t BinaryChecksum(const void* data, size_t bytes, uint64_t seed) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed, seed ^ 0x1234567, seed ^ 0x89ABCDEF, seed ^ 0xDEADBEEF};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    for (int k = 0; k < 4; ++k) lane[k] = (lane[k] ^ w[k]) * kMul + (lane[k] >> 29);
  }
  for (; i < bytes; ++i) lane[0] = (lane[0] ^ p[i]) * kMul + (lane[0] >> 29);
  uint64_t h = bytes;
  for (int k = 0; k < 4; ++k) h = Mix64(h ^ lane[k]);
  return h;
}

// Checksum of a whole file image: header with its checksum field zeroed, then the rest.
uint64_t FileChecksum(const char* file, uint64_t bytes, size_t header_bytes) {
  BinaryHeader header{};
  std::memcpy(&header, file, header_bytes);
  header.checksum = 0;
  const uint64_t seed = BinaryChecksum(&header, header_bytes, 0);
  return BinaryChecksum(file + header_bytes, bytes - header_bytes, seed);
}

bool IsBinaryLm(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[8] = {0};
  const size_t got = std::fread(magic, 1, 8, f);
  std::fclose(f);
  return got == 8 && std::memcmp(magic, kBinaryMagic, 8) == 0;
}

void SaveBinary(const NgramLM& model, const std::string& path, bool overwrite) {
  if (!overwrite && access(path.c_str(), F_OK) == 0)
    throw FileError(EEXIST,
                    Message(path, ": file exists (pass overwrite=True / --force to replace it)"));
  BinaryHeader header{};
  std::memcpy(header.magic, kBinaryMagic, 8);
  header.version = kBinaryVersion;
  header.endian = kEndianMarker;
  header.order = static_cast<uint32_t>(model.order());
  header.header_bytes = kHeaderBytes;
  header.vocab_size = model.vocab_size();
  const auto counts = model.counts();
  for (int n = 1; n <= model.order(); ++n) header.counts[n - 1] = counts[n - 1];

  Writer out;
  out.Append(&header, kHeaderBytes);
  std::string meta;
  for (const auto& [key, value] : model.metadata()) {
    for (const std::string* s : {&key, &value}) {
      const uint32_t len = static_cast<uint32_t>(s->size());
      meta.append(reinterpret_cast<const char*>(&len), 4);
      meta.append(*s);
    }
  }
  header.metadata_offset = out.Append(meta.data(), meta.size());
  header.metadata_bytes = meta.size();
  const uint64_t v = model.vocab_size();
  header.vocab_offsets_offset = out.Append(model.vocab_offsets(), (v + 1) * sizeof(uint64_t));
  header.vocab_blob_bytes = model.vocab_offsets()[v];
  header.vocab_blob_offset = out.Append(model.vocab_blob(), header.vocab_blob_bytes);
  header.unigram_offset = out.Append(model.unigrams(), v * sizeof(Entry));
  for (int n = 2; n <= model.order(); ++n) {
    const auto& table = model.table(n);
    header.buckets[n - 1] = table.size();
    header.table_offset[n - 1] = out.Append(table.data(), table.size() * sizeof(Entry));
  }
  header.flags = model.suffix_closed() ? kFlagSuffixClosed : 0;
  header.word_bound_offset = out.Append(model.word_bounds(), v * sizeof(float));
  if (model.pair_bounds() != nullptr) {
    header.flags |= kFlagPairBounds;
    header.pair_bound_offset =
        out.Append(model.pair_bounds(), model.table(2).size() * sizeof(float));
    header.word_slack_offset = out.Append(model.word_slack(), v * sizeof(float));
    if (model.extension_masks() != nullptr) {
      header.flags |= kFlagExtensionMasks;
      header.extension_mask_offset =
          out.Append(model.extension_masks(), model.table(2).size() * sizeof(uint64_t));
    }
  }
  std::vector<char>& buffer = out.buffer();
  header.file_bytes = buffer.size();
  std::memcpy(buffer.data(), &header, kHeaderBytes);
  header.checksum = FileChecksum(buffer.data(), buffer.size(), kHeaderBytes);
  std::memcpy(buffer.data(), &header, kHeaderBytes);

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw FileError(errno, Message(path, ": cannot write: ", std::strerror(errno)));
  const bool ok = std::fwrite(buffer.data(), 1, buffer.size(), f) == buffer.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw FileError(errno, Message(path, ": write failed: ", std::strerror(errno)));
  }
}

namespace {

// The read-only image of a binary LM file and the checks on reading it: every failure names the
// file. Content errors are FormatError; a file that cannot be opened or mapped is FileError.
class Image {
 public:
  explicit Image(const std::string& path) : path_(path) {}

  template <typename... Parts>
  [[noreturn]] void Fail(const Parts&... parts) const {
    throw FormatError(Message(path_, ": ", parts...));
  }

  // Maps the whole file (MAP_POPULATE: the tables are read at random right away), or with
  // `copy` reads it into private memory.
  void Open(bool copy) {
    const int fd = open(path_.c_str(), O_RDONLY);
    if (fd < 0) FailFile("cannot open");
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int error = errno;
      close(fd);
      errno = error;
      FailFile("cannot stat");
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ < kHeaderBytesV3) {
      close(fd);
      Fail("truncated binary LM: ", size_, " bytes, the header alone needs ", kHeaderBytesV3);
    }
    if (copy) {
      ReadAll(fd);
      return;
    }
    auto mapping = std::make_shared<Mapping>();
    mapping->addr = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    const int error = errno;
    close(fd);
    if (mapping->addr == MAP_FAILED) {
      mapping->addr = nullptr;
      errno = error;
      FailFile("cannot mmap");
    }
    mapping->bytes = size_;
    base_ = static_cast<const char*>(mapping->addr);
    storage_ = std::move(mapping);
  }

  // `bytes` bytes at `offset`, which must lie inside the file after the header, 8-byte aligned.
  const char* Section(uint64_t offset, uint64_t bytes, const char* what) const {
    if (offset % 8 != 0 || offset < kHeaderBytesV3 || offset > size_ || bytes > size_ - offset)
      Fail("section '", what, "' (offset ", offset, ", ", bytes, " bytes) lies outside the ", size_,
           "-byte file");
    return base_ + offset;
  }

  const char* base() const { return base_; }
  uint64_t size() const { return size_; }
  std::shared_ptr<const void> keep_alive() const { return storage_; }

 private:
  // Reads size_ bytes of `fd` (then closes it). A file that shrinks meanwhile is a FormatError;
  // one that grows is caught by the header's size check.
  void ReadAll(int fd) {
    auto copy = std::make_shared<Copy>();
    copy->words.reset(new uint64_t[(size_ + 7) / 8]);
    char* out = reinterpret_cast<char*>(copy->words.get());
    ngram::AdviseHugePages(out, size_);
    uint64_t got = 0;
    while (got < size_) {
      const ssize_t n = pread(fd, out + got, size_ - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int error = errno;
        close(fd);
        if (n == 0)
          Fail("the file shrank to ", got, " bytes while it was read (", size_, " at open)");
        errno = error;
        FailFile("read error");
      }
      got += static_cast<uint64_t>(n);
    }
    close(fd);
    base_ = out;
    storage_ = std::move(copy);
  }

  [[noreturn]] void FailFile(const char* what) const {
    const int error = errno;
    throw FileError(error, Message(path_, ": ", what, ": ", std::strerror(error)));
  }

  std::string path_;
  std::shared_ptr<const void> storage_;  // the Mapping or the Copy
  const char* base_ = nullptr;
  uint64_t size_ = 0;
};

// An entry's values: log-probabilities <= 0 (-inf allowed: impossible), finite backoffs.
void CheckValues(const Image& file, const Entry& entry, uint32_t n) {
  if (!(entry.prob_ln <= 0) || !std::isfinite(entry.backoff_ln))
    file.Fail("a ", n, "-gram has log-probability ", entry.prob_ln, " and backoff ",
              entry.backoff_ln, " (log-probabilities must be <= 0, backoffs finite)");
}

// The header, checked against the file: magic, byte order, version, sizes and checksum.
BinaryHeader ReadHeader(const Image& file) {
  BinaryHeader h{};
  std::memcpy(&h, file.base(), kHeaderBytesV3);
  if (std::memcmp(h.magic, kBinaryMagic, 8) != 0)
    file.Fail("not a draftlattice binary LM (bad magic)");
  if (h.endian != kEndianMarker) file.Fail("binary LM has the wrong byte order for this machine");
  if (h.version < 1 || h.version > kBinaryVersion)
    file.Fail("binary LM format version ", h.version,
              " is not supported (this build reads versions 1 to ", kBinaryVersion, ")");
  if (h.version >= 4) {
    if (file.size() < kHeaderBytes)
      file.Fail("truncated binary LM: ", file.size(), " bytes, the header alone needs ",
                kHeaderBytes);
    std::memcpy(&h, file.base(), kHeaderBytes);
  }
  if (h.version == 1) h.flags = h.word_bound_offset = 0;  // reserved (zero) in version 1
  if ((h.flags & ~kKnownFlags) != 0 || (h.version < 3 && (h.flags & kFlagPairBounds) != 0) ||
      (h.version < 4 && (h.flags & kFlagExtensionMasks) != 0))
    file.Fail("unknown header flags ", h.flags, " for format version ", h.version);
  if ((h.flags & kFlagExtensionMasks) != 0 && (h.flags & kFlagPairBounds) == 0)
    file.Fail("extension masks without pair bounds");
  if ((h.flags & kFlagPairBounds) != 0 && (h.order < 2 || (h.flags & kFlagSuffixClosed) == 0))
    file.Fail("pair bounds in a model of order ", h.order,
              (h.flags & kFlagSuffixClosed) ? "" : " that is not suffix-closed");
  if (h.header_bytes != HeaderBytes(h.version))
    file.Fail("header size ", h.header_bytes, " != ", HeaderBytes(h.version));
  if (h.file_bytes != file.size())
    file.Fail("truncated or extended binary LM: header says ", h.file_bytes, " bytes, file has ",
              file.size());
  if (h.order < 1 || h.order > static_cast<uint32_t>(kMaxOrder)) file.Fail("bad order ", h.order);
  if (h.vocab_size == 0 || h.vocab_size >= kNoWord) file.Fail("bad vocabulary size ", h.vocab_size);
  if (FileChecksum(file.base(), file.size(), HeaderBytes(h.version)) != h.checksum)
    file.Fail("checksum mismatch: the binary LM is corrupted");
  return h;
}

// Metadata: pairs of (uint32 length, bytes) fields.
void ReadMetadata(const Image& file, const BinaryHeader& h, NgramLM::Views* views) {
  const char* meta = file.Section(h.metadata_offset, h.metadata_bytes, "metadata");
  for (uint64_t at = 0; at < h.metadata_bytes;) {
    std::string fields[2];
    for (std::string& field : fields) {
      uint32_t len = 0;
      if (h.metadata_bytes - at < 4) file.Fail("metadata section is truncated");
      std::memcpy(&len, meta + at, 4);
      at += 4;
      if (len > h.metadata_bytes - at) file.Fail("metadata section is truncated");
      field.assign(meta + at, len);
      at += len;
    }
    views->metadata[fields[0]] = fields[1];
  }
}

// Word spellings (offsets into one blob) and the unigram entries.
void ReadVocab(const Image& file, const BinaryHeader& h, NgramLM::Views* views) {
  if (h.vocab_size > (file.size() / sizeof(uint64_t)))
    file.Fail("bad vocabulary size ", h.vocab_size);
  views->vocab_offsets = reinterpret_cast<const uint64_t*>(
      file.Section(h.vocab_offsets_offset, (h.vocab_size + 1) * sizeof(uint64_t), "vocab offsets"));
  views->vocab_blob = file.Section(h.vocab_blob_offset, h.vocab_blob_bytes, "vocab");
  for (uint64_t i = 0; i < h.vocab_size; ++i)
    if (views->vocab_offsets[i] > views->vocab_offsets[i + 1])
      file.Fail("vocab offsets are not sorted");
  if (views->vocab_offsets[0] != 0 || views->vocab_offsets[h.vocab_size] != h.vocab_blob_bytes)
    file.Fail("vocab offsets do not match the vocab size");
  if (h.vocab_size > file.size() / sizeof(Entry)) file.Fail("bad vocabulary size ", h.vocab_size);
  views->unigrams = reinterpret_cast<const Entry*>(
      file.Section(h.unigram_offset, h.vocab_size * sizeof(Entry), "unigrams"));
  if (h.counts[0] != h.vocab_size)
    file.Fail("header counts ", h.counts[0], " 1-grams but the vocabulary has ", h.vocab_size,
              " words");
  for (uint64_t i = 0; i < h.vocab_size; ++i) CheckValues(file, views->unigrams[i], 1);
}

// The hash tables of orders 2..N.
void ReadTables(const Image& file, const BinaryHeader& h, NgramLM::Views* views) {
  for (uint32_t n = 2; n <= h.order; ++n) {
    const uint64_t buckets = h.buckets[n - 1];
    if (buckets <= h.counts[n - 1] || buckets > file.size() / sizeof(Entry))
      file.Fail("bad bucket count ", buckets, " for ", h.counts[n - 1], " ", n, "-grams");
    const Entry* table = reinterpret_cast<const Entry*>(
        file.Section(h.table_offset[n - 1], buckets * sizeof(Entry), "n-gram table"));
    // Lookups stop at an empty bucket: a table without one (only a forged file, since the
    // checksum matched) would make them probe forever. Valid tables are at most 2/3 full,
    // so this scan ends within a few buckets.
    uint64_t empty = 0;
    while (empty < buckets && table[empty].key != 0) ++empty;
    if (empty == buckets) file.Fail("the ", n, "-gram table has no empty bucket");
    // The checksum only detects accidents: a forged file can carry a valid one. A table fuller
    // than the writer's load factor makes every lookup probe long runs, and a positive or NaN
    // value is no log-probability, so both are checked here (one pass over the mapped table).
    uint64_t used = 0;
    for (uint64_t b = 0; b < buckets; ++b) {
      if (table[b].key == 0) continue;
      ++used;
      CheckValues(file, table[b], n);
    }
    if (used > buckets / ngram::kLoadFactor + 1)
      file.Fail("the ", n, "-gram table is fuller (", used, " of ", buckets,
                " buckets) than any writer makes it");
    views->tables.emplace_back(table, buckets);
  }
}

}  // namespace

std::shared_ptr<NgramLM> LoadBinary(const std::string& path, bool copy) {
  Image file(path);
  file.Open(copy);
  const BinaryHeader h = ReadHeader(file);
  NgramLM::Views views;
  views.order = static_cast<int>(h.order);
  views.vocab_size = h.vocab_size;
  for (uint32_t n = 1; n <= h.order; ++n) views.counts.push_back(h.counts[n - 1]);
  ReadMetadata(file, h, &views);
  ReadVocab(file, h, &views);
  ReadTables(file, h, &views);
  views.suffix_closed = (h.flags & kFlagSuffixClosed) != 0;
  if (h.version >= 2) {  // version 1 has no bounds: NgramLM derives weaker ones from the tables
    views.word_bounds = reinterpret_cast<const float*>(
        file.Section(h.word_bound_offset, h.vocab_size * sizeof(float), "word bounds"));
    // A NaN bound disables the search's pruning test (every comparison is false). Writers
    // before this check stored NaN for a word whose every probability is -inf.
    for (uint64_t w = 0; w < h.vocab_size; ++w)
      if (std::isnan(views.word_bounds[w]))
        file.Fail("the word bound of word ", w,
                  " is NaN (a file written by an older version: "
                  "compile it again from its ARPA, or build it again)");
  }
  if ((h.flags & kFlagPairBounds) != 0) {
    views.pair_bounds = reinterpret_cast<const float*>(
        file.Section(h.pair_bound_offset, h.buckets[1] * sizeof(float), "pair bounds"));
    views.word_slack = reinterpret_cast<const float*>(
        file.Section(h.word_slack_offset, h.vocab_size * sizeof(float), "word slack"));
    // As for the word bounds: a NaN would disable the search's pruning test.
    for (uint64_t b = 0; b < h.buckets[1]; ++b)
      if (std::isnan(views.pair_bounds[b]))
        file.Fail("the pair bound of bigram bucket ", b, " is NaN");
    for (uint64_t w = 0; w < h.vocab_size; ++w)
      if (!(views.word_slack[w] >= 0) || std::isinf(views.word_slack[w]))
        file.Fail("the backoff slack of word ", w, " is ", views.word_slack[w],
                  " (must be finite and >= 0)");
    // Any mask is safe to read; a wrong one (only a forged file) makes bounds wrong, as a
    // wrong pair bound would.
    if ((h.flags & kFlagExtensionMasks) != 0)
      views.extension_masks = reinterpret_cast<const uint64_t*>(file.Section(
          h.extension_mask_offset, h.buckets[1] * sizeof(uint64_t), "extension masks"));
  }
  views.keep_alive = file.keep_alive();
  return std::make_shared<NgramLM>(std::move(views));
}

}  // namespace dl
