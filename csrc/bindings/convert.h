// Python -> C++ argument conversion shared by the binding files (type conversion only).
//
// Scalars: a wrong Python type is a TypeError naming the argument ("p must be an integer, got
// 1.5"); whether the value is allowed is the core's to check (dl::InvalidArgument -> ValueError).
// Arrays: anything numpy can read; the rank, dtype kind and int32 range are checked here because
// they decide how the values are converted, with the same messages for every binding.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "errors.h"

namespace dl::bindings {

template <typename T>
using CArray = pybind11::array_t<T, pybind11::array::c_style | pybind11::array::forcecast>;

// `array` as a C-contiguous CArray<T>. pybind11's ensure() returns an empty handle (and clears
// numpy's error) when numpy's cast fails, e.g. float64 values beyond float32's range while
// warnings are errors; every use would then read through a null array, so that is an error here.
template <typename T>
CArray<T> Converted(const pybind11::array& array, const char* name, const char* type) {
  CArray<T> out = CArray<T>::ensure(array);
  if (!out)
    throw InvalidArgument(Message(name, " could not be converted to ", type,
                                  " (numpy's cast failed: values out of its range?)"));
  return out;
}

// A fresh numpy array owning a copy of `values`, with the given shape (at most 4 dimensions).
// Made through numpy's C API directly: array_t's constructor builds shape and stride vectors on
// the heap and looks the dtype up by name, about 150 ns per array, and a rescoring call returns
// four (a 1x1 lattice's whole call is about 2 us).
template <typename T>
pybind11::array_t<T> ToNumpy(const std::vector<T>& values,
                             std::initializer_list<pybind11::ssize_t> shape) {
  namespace detail = pybind11::detail;
  const auto& api = detail::npy_api::get();
  Py_intptr_t dims[4];
  int ndim = 0;
  for (const pybind11::ssize_t d : shape) dims[ndim++] = d;
  // NewFromDescr steals the reference DescrFromType returns.
  PyObject* descr = api.PyArray_DescrFromType_(detail::npy_format_descriptor<T>::value);
  if (descr == nullptr) throw pybind11::error_already_set();
  auto out = pybind11::reinterpret_steal<pybind11::array_t<T>>(api.PyArray_NewFromDescr_(
      api.PyArray_Type_, descr, ndim, dims, nullptr, nullptr, 0, nullptr));
  if (!out) throw pybind11::error_already_set();
  if (!values.empty())
    std::memcpy(detail::array_proxy(out.ptr())->data, values.data(), values.size() * sizeof(T));
  return out;
}

inline std::string Repr(pybind11::handle obj) { return pybind11::repr(obj).cast<std::string>(); }

inline std::string TypeName(pybind11::handle obj) {
  return pybind11::str(pybind11::type::handle_of(obj).attr("__name__")).cast<std::string>();
}

inline std::string ShapeText(const pybind11::array& array) {
  std::string text = "[";
  for (pybind11::ssize_t d = 0; d < array.ndim(); ++d)
    text += (d ? ", " : "") + std::to_string(array.shape(d));
  return text + "]";
}

// An integer argument (int or numpy integer, not bool) as T; TypeError for other types,
// ValueError when it does not fit in T.
template <typename T = int64_t>
T IntArg(pybind11::handle obj, const char* name) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr()))
    throw pybind11::type_error(Message(name, " must be an integer, got ", Repr(obj)));
  auto index = pybind11::reinterpret_steal<pybind11::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw pybind11::error_already_set();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow || value < static_cast<long long>(std::numeric_limits<T>::min()) ||
      value > static_cast<long long>(std::numeric_limits<T>::max()))
    throw InvalidArgument(Message(name, "=", Repr(obj), " is out of range"));
  return static_cast<T>(value);
}

// A real-number argument (int, float, numpy scalar; not bool or str); TypeError otherwise.
inline double RealArg(pybind11::handle obj, const char* name) {
  PyObject* o = obj.ptr();
  const bool number =
      PyFloat_Check(o) || PyIndex_Check(o) || PyObject_HasAttrString(o, "__float__");
  if (PyBool_Check(o) || !number)
    throw pybind11::type_error(Message(name, " must be a number, got ", Repr(obj)));
  const double value = PyFloat_AsDouble(o);
  if (value == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw pybind11::error_already_set();
    PyErr_Clear();  // an int beyond double's range: a bad value, not a bad type
    throw InvalidArgument(Message(name, " is out of range (an integer too large for a float)"));
  }
  return value;
}

// A thread count: None = all hardware threads (0 for dl::ParallelFor), else an integer >= 1.
inline int ThreadsArg(pybind11::handle obj) {
  if (obj.is_none()) return 0;
  const int threads = IntArg<int>(obj, "num_threads");
  if (threads < 1)
    throw InvalidArgument(Message("num_threads must be >= 1, got num_threads=", threads));
  return threads;
}

// `obj` as a numpy array of rank `ndim` (shape named by `shape` in messages).
inline pybind11::array ArrayArg(pybind11::handle obj, const char* name, int ndim,
                                const char* shape) {
  pybind11::array array = pybind11::array::ensure(obj);
  if (!array)
    throw InvalidArgument(Message(name, " must be an array ", shape, ", got ", TypeName(obj)));
  if (array.ndim() != ndim)
    throw InvalidArgument(
        Message(name, " must have shape ", shape, ", got shape ", ShapeText(array)));
  return array;
}

// Floating-point values (float16/32/64) as C-contiguous float32.
inline CArray<float> FloatArray(pybind11::handle obj, const char* name, int ndim,
                                const char* shape) {
  pybind11::array array = ArrayArg(obj, name, ndim, shape);
  if (array.dtype().kind() != 'f')
    throw InvalidArgument(Message(name, " must be float16, float32 or float64, got dtype ",
                                  pybind11::str(array.dtype()).cast<std::string>()));
  return Converted<float>(array, name, "float32");
}

// Integer token ids as C-contiguous int32 (values outside int32 are an error, not wrapped).
// Negative ids pass: the LM or the lattice rejects them naming their position.
inline CArray<int32_t> TokenArray(pybind11::handle obj, const char* name, int ndim,
                                  const char* shape) {
  pybind11::array array = ArrayArg(obj, name, ndim, shape);
  const char kind = array.dtype().kind();
  if (array.size() > 0 && kind != 'i' && kind != 'u')
    throw InvalidArgument(Message(name, " must hold integer token ids, got dtype ",
                                  pybind11::str(array.dtype()).cast<std::string>()));
  if (array.dtype().is(pybind11::dtype::of<int32_t>()))
    return Converted<int32_t>(array, name, "int32");
  if (kind == 'u' && array.itemsize() == 8) {  // above 2^63 an int64 view would show them negative
    const auto unsigned_ids = Converted<uint64_t>(array, name, "uint64");
    for (pybind11::ssize_t i = 0; i < unsigned_ids.size(); ++i)
      if (unsigned_ids.data()[i] > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        throw InvalidArgument(
            Message(name, " holds token id ", unsigned_ids.data()[i], " outside int32"));
  }
  const auto wide = Converted<int64_t>(array, name, "int64");
  const int64_t* v = wide.data();
  for (pybind11::ssize_t i = 0; i < wide.size(); ++i)
    if (v[i] < std::numeric_limits<int32_t>::min() || v[i] > std::numeric_limits<int32_t>::max())
      throw InvalidArgument(Message(name, " holds token id ", v[i], " outside int32"));
  return Converted<int32_t>(wide, name, "int32");
}

// Top-k candidates: token ids and their log-probs, two rank-2 arrays of one shape (named by
// `shape` in messages).
struct TopkArrays {
  CArray<int32_t> tokens;
  CArray<float> logprobs;
  int rows() const { return static_cast<int>(tokens.shape(0)); }
  int k() const { return static_cast<int>(tokens.shape(1)); }
};
inline TopkArrays TopkArgs(pybind11::handle tokens_obj, pybind11::handle logprobs_obj,
                           const char* shape) {
  TopkArrays topk{TokenArray(tokens_obj, "tokens", 2, shape),
                  FloatArray(logprobs_obj, "logprobs", 2, shape)};
  if (topk.tokens.shape(0) != topk.logprobs.shape(0) ||
      topk.tokens.shape(1) != topk.logprobs.shape(1))
    throw InvalidArgument(Message("tokens shape ", ShapeText(topk.tokens), " != logprobs shape ",
                                  ShapeText(topk.logprobs)));
  return topk;
}

// A list or tuple of Python ints within int32 as a vector, without a numpy round trip (which
// costs about as much as rescoring a 4 x 4 lattice); false for anything else.
inline bool IntSequence(pybind11::handle obj, std::vector<int32_t>* out) {
  PyObject* seq = obj.ptr();
  if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  out->resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!PyLong_CheckExact(items[i])) return false;
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(items[i], &overflow);
    if (overflow != 0 || v < std::numeric_limits<int32_t>::min() ||
        v > std::numeric_limits<int32_t>::max())
      return false;  // the numpy path names the value
    (*out)[static_cast<size_t>(i)] = static_cast<int32_t>(v);
  }
  return true;
}

// A 1-D sequence of token ids (None or empty: no tokens) as a vector.
inline std::vector<int32_t> TokenIds(pybind11::handle obj, const char* name) {
  if (obj.is_none()) return {};
  std::vector<int32_t> fast;
  if (IntSequence(obj, &fast)) return fast;
  pybind11::array array = pybind11::array::ensure(obj);
  if (array && array.size() == 0) return {};
  const auto ids = TokenArray(obj, name, 1, "[n] (1-D token ids)");
  return std::vector<int32_t>(ids.data(), ids.data() + ids.size());
}

// pybind11's record of the bound class T, looked up once: pybind11::isinstance and cast each
// look it up by the C++ type's name (a string hash), and isinstance goes through
// __instancecheck__ for a Python subclass such as draftlattice.NgramLM; together about 1 k
// instructions per argument, a tenth of a 1x1 lattice's call.
template <typename T>
pybind11::detail::type_info* TypeRecord() {
  static pybind11::detail::type_info* const info = pybind11::detail::get_type_info(typeid(T), true);
  return info;
}

// Whether `obj` is an instance of the bound class T (or of a subclass).
template <typename T>
bool IsBound(pybind11::handle obj) {
  return PyObject_TypeCheck(obj.ptr(), TypeRecord<T>()->type);
}

// `obj` as a bound C++ object of type T; TypeError naming the expected Python type otherwise.
// The C++ value comes from the instance directly; one whose value is not constructed (a
// subclass whose __init__ did not run) goes pybind11's general way, which raises.
template <typename T>
const T& Bound(pybind11::handle obj, const char* name, const char* type) {
  namespace detail = pybind11::detail;
  detail::type_info* const info = TypeRecord<T>();
  if (!PyObject_TypeCheck(obj.ptr(), info->type))
    throw pybind11::type_error(Message(name, " must be a ", type, ", got ", TypeName(obj)));
  auto* instance = reinterpret_cast<detail::instance*>(obj.ptr());
  const detail::value_and_holder value = instance->get_value_and_holder(info, false);
  if (value && value.holder_constructed() && value.value_ptr() != nullptr)
    return *static_cast<const T*>(value.value_ptr());
  return obj.cast<const T&>();
}

}  // namespace dl::bindings
