// Small numpy <-> C++ conversions shared by the rescoring bindings (type conversion only).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#include "errors.h"

namespace dl::bindings {

template <typename T>
using CArray = pybind11::array_t<T, pybind11::array::c_style | pybind11::array::forcecast>;

// A fresh numpy array owning a copy of `values`, with the given shape.
template <typename T>
pybind11::array_t<T> ToNumpy(const std::vector<T>& values, std::vector<pybind11::ssize_t> shape) {
  pybind11::array_t<T> out(shape);
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

inline void CheckNdim(const pybind11::array& array, int ndim, const char* name, const char* shape) {
  if (array.ndim() != ndim)
    throw InvalidArgument(Message(name, " must have shape ", shape, ", got ", array.ndim(), " dimensions"));
}

// A 1-d int32 context (token ids) as a vector.
inline std::vector<int32_t> ContextVector(const CArray<int32_t>& context, const char* name) {
  if (context.ndim() != 1)
    throw InvalidArgument(Message(name, " must be 1-d token ids, got ", context.ndim(), " dimensions"));
  return std::vector<int32_t>(context.data(), context.data() + context.shape(0));
}

}  // namespace dl::bindings
