// Binds dl::Lattice as draftlattice._core.Lattice (wrapped by draftlattice.lattice.Lattice).
// Type conversion only: the core checks h, k, V, temperature and the values.
#include "lattice.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "batch.h"
#include "bindings/convert.h"
#include "head_topk.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

Lattice FromLogits(const py::object& logits_obj, const py::object& k,
                   const py::object& temperature) {
  const auto logits = FloatArray(logits_obj, "logits", 2, "[h, V]");
  const auto h = logits.shape(0), vocab = logits.shape(1);
  const int top = IntArg<int>(k, "k");
  const auto t = static_cast<float>(RealArg(temperature, "temperature"));
  // A private copy: without the GIL another thread may write to the caller's array, and
  // nth_element over values that change under it is undefined behaviour.
  const std::vector<float> data(logits.data(), logits.data() + logits.size());
  py::gil_scoped_release release;
  return Lattice::FromLogits(data.data(), static_cast<int>(h), static_cast<int>(vocab), top, t);
}

std::vector<Lattice> FromLogitsBatch(const py::object& logits_obj, const py::object& k,
                                     const py::object& temperature, const py::object& num_threads) {
  const auto logits = FloatArray(logits_obj, "logits", 3, "[B, h, V]");
  const auto batch = logits.shape(0), h = logits.shape(1), vocab = logits.shape(2);
  if (batch < 1) throw InvalidArgument(Message("logits batch must be non-empty, got B=", batch));
  const int top = IntArg<int>(k, "k");
  const auto t = static_cast<float>(RealArg(temperature, "temperature"));
  const int threads = ThreadsArg(num_threads);
  const std::vector<float> data(logits.data(), logits.data() + logits.size());  // see FromLogits
  std::vector<Lattice> out(batch);
  py::gil_scoped_release release;
  ParallelFor(batch, threads, [&](int64_t b) {
    out[b] = Lattice::FromLogits(data.data() + static_cast<size_t>(b) * h * vocab,
                                 static_cast<int>(h), static_cast<int>(vocab), top, t);
  });
  return out;
}

Lattice FromTopk(const py::object& tokens_obj, const py::object& logprobs_obj,
                 const py::object& vocab_size) {
  const TopkArrays topk = TopkArgs(tokens_obj, logprobs_obj, "[h, k]");
  const int64_t limit = vocab_size.is_none() ? -1 : IntArg(vocab_size, "vocab_size");
  return Lattice::FromTopk(topk.tokens.data(), topk.logprobs.data(), topk.rows(), topk.k(), limit);
}

// (tokens int32 [R, k], logprobs float32 [R, k]) of logits [R, V]: each row's top k under
// softmax(row / T), without building a Lattice (a drafter's top-k lattice as arrays).
py::tuple TopkLogprobsArrays(const py::object& logits_obj, const py::object& k,
                             const py::object& temperature) {
  const auto logits = FloatArray(logits_obj, "logits", 2, "[R, V]");
  const auto rows = logits.shape(0), vocab = logits.shape(1);
  const int top = IntArg<int>(k, "k");
  const auto t = static_cast<float>(RealArg(temperature, "temperature"));
  std::vector<int32_t> tokens(static_cast<size_t>(rows) * std::max(top, 0));
  std::vector<float> logprobs(tokens.size());
  // With the GIL held, and so on the caller's array itself: a step's few heads take ~0.1 ms,
  // less than copying them for a release would add.
  TopkLogprobs(logits.data(), static_cast<int>(rows), static_cast<int>(vocab), top, t,
               tokens.data(), logprobs.data());
  return py::make_tuple(ToNumpy(tokens, {rows, top}), ToNumpy(logprobs, {rows, top}));
}

}  // namespace

void BindLattice(py::module_& m) {
  m.def("topk_logprobs", &TopkLogprobsArrays, py::arg("logits"), py::arg("k"),
        py::arg("temperature") = 1.0);
  py::class_<Lattice>(m, "Lattice")
      .def_static("from_logits", &FromLogits, py::arg("logits"), py::arg("k"),
                  py::arg("temperature") = 1.0)
      .def_static("from_logits_batch", &FromLogitsBatch, py::arg("logits"), py::arg("k"),
                  py::arg("temperature") = 1.0, py::arg("num_threads") = py::none())
      .def_static("from_topk", &FromTopk, py::arg("tokens"), py::arg("logprobs"),
                  py::arg("vocab_size") = py::none())
      .def_readonly("h", &Lattice::h)
      .def_readonly("k", &Lattice::k)
      .def_property_readonly("tokens",
                             [](const Lattice& l) { return ToNumpy(l.tokens, {l.h, l.k}); })
      .def_property_readonly("logprobs",
                             [](const Lattice& l) { return ToNumpy(l.logprobs, {l.h, l.k}); })
      .def("to_fst_text", &Lattice::ToFstText)
      .def("to_dot", &Lattice::ToDot, py::arg("words") = std::vector<std::string>{});
}

}  // namespace dl::bindings
