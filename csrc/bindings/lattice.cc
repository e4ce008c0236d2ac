// Binds dl::Lattice as draftlattice._core.Lattice (wrapped by draftlattice.lattice.Lattice).
#include "lattice.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "batch.h"
#include "bindings/arrays.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

Lattice FromLogits(const CArray<float>& logits, int k, float temperature) {
  CheckNdim(logits, 2, "logits", "[h, V]");
  const auto h = logits.shape(0), vocab = logits.shape(1);
  const float* data = logits.data();
  py::gil_scoped_release release;
  return Lattice::FromLogits(data, static_cast<int>(h), static_cast<int>(vocab), k, temperature);
}

std::vector<Lattice> FromLogitsBatch(const CArray<float>& logits, int k, float temperature, int threads) {
  CheckNdim(logits, 3, "logits", "[B, h, V]");
  const auto batch = logits.shape(0), h = logits.shape(1), vocab = logits.shape(2);
  if (batch < 1) throw InvalidArgument(Message("logits batch must be non-empty, got B=", batch));
  const float* data = logits.data();
  std::vector<Lattice> out(batch);
  py::gil_scoped_release release;
  ParallelFor(batch, threads, [&](int64_t b) {
    out[b] = Lattice::FromLogits(data + static_cast<size_t>(b) * h * vocab, static_cast<int>(h),
                                 static_cast<int>(vocab), k, temperature);
  });
  return out;
}

Lattice FromTopk(const CArray<int32_t>& tokens, const CArray<float>& logprobs) {
  CheckNdim(tokens, 2, "tokens", "[h, k]");
  CheckNdim(logprobs, 2, "logprobs", "[h, k]");
  if (tokens.shape(0) != logprobs.shape(0) || tokens.shape(1) != logprobs.shape(1))
    throw InvalidArgument(Message("tokens shape [", tokens.shape(0), ", ", tokens.shape(1),
                                  "] != logprobs shape [", logprobs.shape(0), ", ", logprobs.shape(1), "]"));
  return Lattice::FromTopk(tokens.data(), logprobs.data(), static_cast<int>(tokens.shape(0)),
                           static_cast<int>(tokens.shape(1)));
}

}  // namespace

void BindLattice(py::module_& m) {
  py::class_<Lattice>(m, "Lattice")
      .def_static("from_logits", &FromLogits, py::arg("logits"), py::arg("k"), py::arg("temperature") = 1.0f)
      .def_static("from_logits_batch", &FromLogitsBatch, py::arg("logits"), py::arg("k"),
                  py::arg("temperature") = 1.0f, py::arg("num_threads") = 0)
      .def_static("from_topk", &FromTopk, py::arg("tokens"), py::arg("logprobs"))
      .def_readonly("h", &Lattice::h)
      .def_readonly("k", &Lattice::k)
      .def_property_readonly("tokens", [](const Lattice& l) { return ToNumpy(l.tokens, {l.h, l.k}); })
      .def_property_readonly("logprobs", [](const Lattice& l) { return ToNumpy(l.logprobs, {l.h, l.k}); })
      .def("to_fst_text", &Lattice::ToFstText)
      .def("to_dot", &Lattice::ToDot, py::arg("words") = std::vector<std::string>{});
}

}  // namespace dl::bindings
