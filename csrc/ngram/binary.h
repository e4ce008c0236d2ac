// Binary n-gram model format (".dlm"): the in-memory tables of NgramLM written as they are, so
// that loading is mmap + validation + a checksum pass.
//
// Layout (little-endian only; all sections 8-byte aligned, file size a multiple of 8):
//   BinaryHeader (kHeaderBytes)  magic "DLNGRAM\0", version, endian marker, order, file size,
//                                checksum, counts, per-order bucket counts, section offsets
//   metadata      repeated (uint32 key bytes, key, uint32 value bytes, value), padded
//   vocab offsets uint64[V + 1] into the vocab blob
//   vocab blob    the words, concatenated, padded
//   unigrams      Entry[V]
//   tables        Entry[buckets[n]] for n = 2 .. order
//   word bounds   float[V], padded (version >= 2; word_bound.h); the header's flags say whether
//                 the model is suffix-closed (ngram_lm.h). Version 1 files (no bounds, no flags)
//                 still load: the model is then treated as not suffix-closed, with bounds
//                 derived from the tables (weaker).
//   pair bounds   float[buckets[2]] then float[V], padded (version >= 3, with the header flag
//                 kFlagPairBounds; only for suffix-closed models): one bound per bigram bucket and
//                 each word's backoff slack (pair_bound.h). Files without them load with the
//                 per-word bounds alone.
//   extension masks  uint64[buckets[2]] (version >= 4, with the header flag kFlagExtensionMasks,
//                 beside pair bounds): per bigram bucket, the bits of the words u such that a
//                 listed n-gram of order >= 3 ends in "u v w" (pair_bound.h), for the search's
//                 refined pair bounds (NgramLM::BoundsAfter). Version 4 headers are 8 bytes longer
//                 (the masks' offset); versions 1 to 3 still load, without masks.
// The checksum is a 4-lane 64-bit multiply-xor hash over the whole file with the checksum field
// zeroed: memory-bandwidth bound (a few ms per 100 MB). Every offset and size is checked against
// the file size before it is read; any mismatch, a wrong magic, a newer version or a checksum
// failure throws FormatError naming the file and the problem.
#pragma once

#include <memory>
#include <string>

#include "ngram/ngram_lm.h"

namespace dl {

constexpr char kBinaryMagic[8] = {'D', 'L', 'N', 'G', 'R', 'A', 'M', '\0'};
constexpr uint32_t kBinaryVersion = 4;

// True if the file starts with the binary magic (false if it cannot be read).
bool IsBinaryLm(const std::string& path);
// Maps and validates a binary model. The mapping follows the file: a file rewritten in place
// changes scores, and one truncated kills the process (SIGBUS) on the next access, so new models
// are installed by rename (SaveBinary does). `copy` reads the file into private memory instead
// (a read, not a mapping): later changes to the file cannot reach the model.
std::shared_ptr<NgramLM> LoadBinary(const std::string& path, bool copy = false);
// Writes `model`; throws InvalidArgument if `path` exists and !overwrite. Atomic (temp + rename).
void SaveBinary(const NgramLM& model, const std::string& path, bool overwrite);
// The checksum used by the format (exposed for benchmarks and tests).
uint64_t BinaryChecksum(const void* data, size_t bytes, uint64_t seed);

}  // namespace dl
