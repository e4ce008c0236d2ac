// Binds the lean step's draft heads (lowbit/draft_heads.h): their weights held once, their logits
// computed in place into a float32 array the Python side allocates. Arrays as lowbit_arrays.h.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "bindings/convert.h"
#include "bindings/lowbit_arrays.h"
#include "lowbit/draft_heads.h"
#include "lowbit/matmul.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

// (codes, scales, mins or None) of packed weights W [n, k] with `bits` (4 or 8).
lowbit::LowbitWeights Packed(const char* name, int bits, const py::tuple& parts, int64_t n,
                             int64_t k) {
  if (parts.size() != 3)
    throw InvalidArgument(Message(name, ": (codes, scales, mins), got ", parts.size(), " items"));
  std::optional<py::array> mins;
  if (!parts[2].is_none()) mins = parts[2].cast<py::array>();
  return WeightsArg(name, bits, parts[0].cast<py::array>(), parts[1].cast<py::array>(), mins, n, k);
}

class DraftHeadsStep {
 public:
  DraftHeadsStep(int64_t count, int64_t hidden, int64_t width, int64_t vocab,
                 const std::optional<py::array>& embedding, int bits, const py::tuple& up,
                 const py::array& up_bias, const py::tuple& down, const py::array& down_bias,
                 int rows_bits, const py::tuple& rows, int64_t rows_n,
                 const std::optional<py::array>& row_tokens, const std::string& kernel)
      : kept_(py::make_tuple(embedding, up, up_bias, down, down_bias, rows, row_tokens)),
        kernel_(kernel) {
    const auto known = lowbit::LowbitKernels();
    if (kernel != "auto" && std::find(known.begin(), known.end(), kernel) == known.end())
      throw InvalidArgument(Message("low-bit kernel '", kernel, "' is not available on this CPU"));
    const int64_t in = embedding ? 2 * hidden : hidden;
    w_.count = count;
    w_.hidden = hidden;
    w_.width = width;
    w_.vocab = vocab;
    w_.embedding = nullptr;
    if (embedding) {
      w_.embedding = reinterpret_cast<const uint16_t*>(Exact<int16_t>(*embedding, "embedding", 2));
      if (embedding->shape(0) != vocab || embedding->shape(1) != hidden)
        throw InvalidArgument(Message("embedding of shape ", ShapeText(*embedding), " for ", vocab,
                                      " tokens of ", hidden));
    }
    w_.up = Packed("up", bits, up, count * width, in);
    w_.up_bias = Exact<float>(up_bias, "up_bias", 1);
    if (up_bias.shape(0) != count * width)
      throw InvalidArgument(
          Message("up_bias of shape ", ShapeText(up_bias), " for ", count * width));
    w_.down = Packed("down", bits, down, count * hidden, width);
    w_.down_bias = Exact<float>(down_bias, "down_bias", 2);
    if (down_bias.shape(0) != count || down_bias.shape(1) != hidden)
      throw InvalidArgument(Message("down_bias of shape ", ShapeText(down_bias), " for ", count,
                                    " heads of ", hidden));
    w_.rows = Packed("rows", rows_bits, rows, rows_n, hidden);
    w_.row_tokens = nullptr;
    if (row_tokens) {
      w_.row_tokens = Exact<int64_t>(*row_tokens, "row_tokens", 1);
      if (row_tokens->shape(0) != rows_n)
        throw InvalidArgument(
            Message("row_tokens of shape ", ShapeText(*row_tokens), " for ", rows_n, " rows"));
      for (int64_t r = 0; r < rows_n; ++r)
        if (w_.row_tokens[r] < 0 || w_.row_tokens[r] >= vocab)
          throw InvalidArgument(Message("row_tokens[", r, "] = ", w_.row_tokens[r],
                                        " outside the vocabulary of ", vocab));
    }
    lowbit::CheckDraftHeads(w_);  // here, so that bad weights fail when they are given
  }

  void Forward(const py::array& z, const py::array& next, const py::array& logits, int threads) {
    const auto* zs = Exact<int16_t>(z, "z", 2);
    const auto* ids = Exact<int64_t>(next, "next", 1);
    auto* out = Exact<float>(logits, "logits", 3, true);
    const int64_t batch = z.shape(0);
    if (z.shape(1) != w_.hidden)
      throw InvalidArgument(Message("z has shape ", ShapeText(z), " for hidden size ", w_.hidden));
    if (next.shape(0) != batch)
      throw InvalidArgument(Message("next has shape ", ShapeText(next), " for ", batch, " rows"));
    if (logits.shape(0) != batch || logits.shape(1) != w_.count || logits.shape(2) != w_.vocab)
      throw InvalidArgument(Message("logits has shape ", ShapeText(logits), ", expected [", batch,
                                    ", ", w_.count, ", ", w_.vocab, "]"));
    py::gil_scoped_release release;
    lowbit::RunDraftHeads(w_, reinterpret_cast<const uint16_t*>(zs), ids, batch, out, threads,
                          kernel_);
  }

 private:
  py::tuple kept_;  // keeps the weights' arrays alive
  std::string kernel_;
  lowbit::DraftHeadsWeights w_{};
};

}  // namespace

void BindDraftHeads(py::module_& m) {
  py::class_<DraftHeadsStep>(m, "DraftHeadsStep")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, const std::optional<py::array>&, int,
                    const py::tuple&, const py::array&, const py::tuple&, const py::array&, int,
                    const py::tuple&, int64_t, const std::optional<py::array>&,
                    const std::string&>(),
           py::arg("count"), py::arg("hidden"), py::arg("width"), py::arg("vocab"),
           py::arg("embedding"), py::arg("bits"), py::arg("up"), py::arg("up_bias"),
           py::arg("down"), py::arg("down_bias"), py::arg("rows_bits"), py::arg("rows"),
           py::arg("rows_n"), py::arg("row_tokens"), py::arg("kernel") = "auto")
      .def("forward", &DraftHeadsStep::Forward, py::arg("z"), py::arg("next"), py::arg("logits"),
           py::arg("threads"));
}

}  // namespace dl::bindings
