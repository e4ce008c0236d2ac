// Arrays of the lean step's bindings (lowbit.cc, draft_heads.cc), used in place: the Python side
// passes numpy views of torch tensors, each already of its exact dtype and C-contiguous (and
// writable for outputs); nothing is converted or copied. Scales and minima are float16 bits.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "bindings/convert.h"
#include "lowbit/matmul.h"

namespace dl::bindings {

// `array` as T* after checking its dtype, rank, contiguity (and writability for outputs).
template <typename T>
T* Exact(const pybind11::array& array, const char* name, pybind11::ssize_t ndim,
         bool writable = false) {
  if (!array.dtype().is(pybind11::dtype::of<T>()))
    throw InvalidArgument(Message(name, " must have dtype ",
                                  std::string(pybind11::str(pybind11::dtype::of<T>())), ", got ",
                                  std::string(pybind11::str(array.dtype()))));
  if (array.ndim() != ndim)
    throw InvalidArgument(
        Message(name, " must have ", ndim, " dimensions, got shape ", ShapeText(array)));
  if (!(array.flags() & pybind11::array::c_style))
    throw InvalidArgument(Message(name, " must be C-contiguous"));
  if (writable && !array.writeable()) throw InvalidArgument(Message(name, " must be writable"));
  return static_cast<T*>(const_cast<void*>(array.data()));
}

// Packed weights W [n, k] (matmul.h's layout) of `bits` 4 or 8, their shapes checked; `name`
// names them in messages. 4-bit codes need mins, 8-bit ones take none.
inline lowbit::LowbitWeights WeightsArg(const char* name, int bits, const pybind11::array& codes,
                                        const pybind11::array& scales,
                                        const std::optional<pybind11::array>& mins, int64_t n,
                                        int64_t k) {
  if (bits != 4 && bits != 8)
    throw InvalidArgument(Message(name, ": bits must be 4 or 8, got ", bits));
  const auto format = bits == 4 ? lowbit::Codes::kInt4 : lowbit::Codes::kInt8;
  if ((bits == 4) != mins.has_value())
    throw InvalidArgument(Message(name, bits == 4 ? ": 4-bit codes need mins"
                                                  : ": 8-bit codes are symmetric: pass mins=None"));
  if (n <= 0) throw InvalidArgument(Message(name, ": n must be positive, got ", n));
  if (k <= 0 || k % lowbit::kGroup != 0)
    throw InvalidArgument(
        Message(name, ": x has ", k, " columns, not a multiple of ", lowbit::kGroup));
  const auto* code = Exact<uint8_t>(codes, "codes", 4);
  const auto* scale = Exact<uint16_t>(scales, "scales", 3);
  const uint16_t* low = mins ? Exact<uint16_t>(*mins, "mins", 3) : nullptr;
  const int64_t blocks = (n + lowbit::kLanes - 1) / lowbit::kLanes, groups = k / lowbit::kGroup;
  const auto expect = [&](const pybind11::array& a, const char* part,
                          std::initializer_list<pybind11::ssize_t> shape) {
    pybind11::ssize_t d = 0;
    for (const pybind11::ssize_t size : shape)
      if (a.shape(d++) != size)
        throw InvalidArgument(Message(name, ": ", part, " has shape ", ShapeText(a), " for n=", n,
                                      ", k=", k, ", bits=", bits));
  };
  expect(codes, "codes", {blocks, groups, lowbit::kGroup / 2, lowbit::PairBytes(format)});
  expect(scales, "scales", {blocks, groups, lowbit::kLanes});
  if (mins) expect(*mins, "mins", {blocks, groups, lowbit::kLanes});
  return {format, code, scale, low, n, k};
}

}  // namespace dl::bindings
