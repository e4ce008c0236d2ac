// Binds the low-bit matrix product of the lean step (lowbit/matmul.h). Arrays are used in place
// (the Python side passes numpy views of torch tensors): each must already have its exact dtype
// and be C-contiguous, and `out` writable; nothing is converted or copied.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "bindings/convert.h"
#include "lowbit/matmul.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

// `array` as T* after checking its dtype, rank, contiguity (and writability for outputs).
template <typename T>
T* Exact(const py::array& array, const char* name, py::ssize_t ndim, bool writable = false) {
  if (!array.dtype().is(py::dtype::of<T>()))
    throw InvalidArgument(Message(name, " must have dtype ",
                                  std::string(py::str(py::dtype::of<T>())), ", got ",
                                  std::string(py::str(array.dtype()))));
  if (array.ndim() != ndim)
    throw InvalidArgument(
        Message(name, " must have ", ndim, " dimensions, got shape ", ShapeText(array)));
  if (!(array.flags() & py::array::c_style))
    throw InvalidArgument(Message(name, " must be C-contiguous"));
  if (writable && !array.writeable()) throw InvalidArgument(Message(name, " must be writable"));
  return static_cast<T*>(const_cast<void*>(array.data()));
}

void Matmul(const py::array& x, int bits, const py::array& codes, const py::array& scales,
            const std::optional<py::array>& mins, int64_t n, const py::array& out, int threads,
            const std::string& kernel) {
  if (bits != 4 && bits != 8) throw InvalidArgument(Message("bits must be 4 or 8, got ", bits));
  const auto format = bits == 4 ? lowbit::Codes::kInt4 : lowbit::Codes::kInt8;
  if ((bits == 4) != mins.has_value())
    throw InvalidArgument(bits == 4 ? "4-bit codes need mins"
                                    : "8-bit codes are symmetric: pass mins=None");
  const auto* xs = Exact<int16_t>(x, "x", 2);
  const auto* code = Exact<uint8_t>(codes, "codes", 4);
  const auto* scale = Exact<float>(scales, "scales", 3);
  const float* low = mins ? Exact<float>(*mins, "mins", 3) : nullptr;
  auto* o = Exact<int16_t>(out, "out", 2, true);
  const int64_t m = x.shape(0), k = x.shape(1);
  if (n <= 0) throw InvalidArgument(Message("n must be positive, got ", n));
  if (k % lowbit::kGroup != 0)
    throw InvalidArgument(Message("x has ", k, " columns, not a multiple of ", lowbit::kGroup));
  const int64_t blocks = (n + lowbit::kLanes - 1) / lowbit::kLanes, groups = k / lowbit::kGroup;
  const auto expect = [&](const py::array& a, const char* name,
                          std::initializer_list<py::ssize_t> shape) {
    py::ssize_t d = 0;
    for (const py::ssize_t size : shape)
      if (a.shape(d++) != size)
        throw InvalidArgument(
            Message(name, " has shape ", ShapeText(a), " for n=", n, ", k=", k, ", bits=", bits));
  };
  expect(codes, "codes", {blocks, groups, lowbit::kGroup / 2, lowbit::PairBytes(format)});
  expect(scales, "scales", {blocks, groups, lowbit::kLanes});
  if (mins) expect(*mins, "mins", {blocks, groups, lowbit::kLanes});
  expect(out, "out", {m, n});
  const lowbit::LowbitWeights w{format, code, scale, low, n, k};
  py::gil_scoped_release release;
  lowbit::LowbitMatmul(reinterpret_cast<const uint16_t*>(xs), m, w, reinterpret_cast<uint16_t*>(o),
                       threads, kernel);
}

}  // namespace

void BindLowbit(py::module_& m) {
  m.def("lowbit_matmul", &Matmul, py::arg("x"), py::arg("bits"), py::arg("codes"),
        py::arg("scales"), py::arg("mins"), py::arg("n"), py::arg("out"), py::arg("threads"),
        py::arg("kernel") = "auto");
  m.def("lowbit_kernels", &lowbit::LowbitKernels);
}

}  // namespace dl::bindings
