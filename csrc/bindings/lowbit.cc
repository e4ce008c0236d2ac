// Binds the low-bit matrix product of the lean step (lowbit/matmul.h) and its fused layers
// (lowbit/llama_stack.h). Arrays are used in place (lowbit_arrays.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "bindings/convert.h"
#include "bindings/lowbit_arrays.h"
#include "lowbit/attention.h"
#include "lowbit/llama_stack.h"
#include "lowbit/matmul.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

void Matmul(const py::array& x, int bits, const py::array& codes, const py::array& scales,
            const std::optional<py::array>& mins, int64_t n, const py::array& out, int threads,
            const std::string& kernel) {
  const auto* xs = Exact<int16_t>(x, "x", 2);
  auto* o = Exact<int16_t>(out, "out", 2, true);
  const int64_t m = x.shape(0), k = x.shape(1);
  const lowbit::LowbitWeights w = WeightsArg("lowbit_matmul", bits, codes, scales, mins, n, k);
  if (out.shape(0) != m || out.shape(1) != n)
    throw InvalidArgument(
        Message("out has shape ", ShapeText(out), ", expected [", m, ", ", n, "]"));
  py::gil_scoped_release release;
  lowbit::LowbitMatmul(reinterpret_cast<const uint16_t*>(xs), m, w, reinterpret_cast<uint16_t*>(o),
                       threads, kernel);
}

// The fused lean step's layers (lowbit/llama_stack.h), holding the arrays it reads.
class LlamaStack {
 public:
  // layers: per layer (qkv, o, gate_up, down) as (codes, scales, mins) int4 triples, then the
  // attention and MLP norms (int16 views of bf16).
  LlamaStack(int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
             int64_t intermediate, float eps, const py::list& layers, const py::array& final_norm,
             const std::string& kernel)
      : shape_{hidden, heads, kv_heads, head_dim, intermediate, eps},
        arrays_(layers),
        final_norm_array_(final_norm),
        kernel_(kernel) {
    final_norm_ = reinterpret_cast<const uint16_t*>(Exact<int16_t>(final_norm, "final_norm", 1));
    if (final_norm.shape(0) != hidden)
      throw InvalidArgument(
          Message("final_norm of shape ", ShapeText(final_norm), " for hidden=", hidden));
    const auto known = lowbit::LowbitKernels();
    if (kernel != "auto" && std::find(known.begin(), known.end(), kernel) == known.end())
      throw InvalidArgument(Message("low-bit kernel '", kernel, "' is not available on this CPU"));
    const int64_t widths[4][2] = {{(heads + 2 * kv_heads) * head_dim, hidden},
                                  {hidden, heads * head_dim},
                                  {2 * intermediate, hidden},
                                  {hidden, intermediate}};
    for (const py::handle item : layers) {
      const auto parts = item.cast<py::tuple>();
      if (parts.size() != 14)
        throw InvalidArgument(Message("a layer has 14 arrays, got ", parts.size()));
      lowbit::LowbitWeights w[4];
      for (int i = 0; i < 4; ++i) {
        const std::string name = Message("layer product ", i);
        w[i] = WeightsArg(name.c_str(), 4, parts[3 * i].cast<py::array>(),
                          parts[3 * i + 1].cast<py::array>(), parts[3 * i + 2].cast<py::array>(),
                          widths[i][0], widths[i][1]);
      }
      const auto attn_norm = parts[12].cast<py::array>(), mlp_norm = parts[13].cast<py::array>();
      for (const auto* norm : {&attn_norm, &mlp_norm})
        if (norm->ndim() != 1 || norm->shape(0) != hidden)
          throw InvalidArgument(
              Message("a norm of shape ", ShapeText(*norm), " for hidden=", hidden));
      layers_.push_back({w[0], w[1], w[2], w[3],
                         reinterpret_cast<const uint16_t*>(Exact<int16_t>(attn_norm, "norm", 1)),
                         reinterpret_cast<const uint16_t*>(Exact<int16_t>(mlp_norm, "norm", 1))});
    }
  }

  void Forward(const py::array& x, int64_t batch, int64_t tokens, const py::array& cos,
               const py::array& sin, const py::list& keys, const py::list& values, int64_t length,
               const py::array& mask, const py::array& normed, int threads) {
    const int64_t M = batch * tokens, d = shape_.head_dim;
    auto* xs = Exact<int16_t>(x, "x", 2, true);
    if (x.shape(0) != M || x.shape(1) != shape_.hidden)
      throw InvalidArgument(
          Message("x has shape ", ShapeText(x), " for ", M, " rows of ", shape_.hidden));
    for (const auto* table : {&cos, &sin})
      if (Exact<int16_t>(*table, "cos/sin", 2) && (table->shape(0) != M || table->shape(1) != d))
        throw InvalidArgument(
            Message("cos/sin of shape ", ShapeText(*table), " for ", M, " rows of ", d));
    const auto* ms = Exact<int16_t>(mask, "mask", 2);
    if (mask.shape(0) != M || mask.shape(1) != length + tokens)
      throw InvalidArgument(Message("mask has shape ", ShapeText(mask), ", expected [", M, ", ",
                                    length + tokens, "]"));
    auto* out = Exact<int16_t>(normed, "normed", 2, true);
    if (normed.shape(0) != M || normed.shape(1) != shape_.hidden)
      throw InvalidArgument(
          Message("normed has shape ", ShapeText(normed), " for ", M, " rows of ", shape_.hidden));
    if (keys.size() != layers_.size() || values.size() != layers_.size())
      throw InvalidArgument(
          Message("keys/values for ", keys.size(), " layers, the model has ", layers_.size()));
    lowbit::LlamaStep step{reinterpret_cast<uint16_t*>(xs),
                           batch,
                           tokens,
                           reinterpret_cast<const uint16_t*>(Exact<int16_t>(cos, "cos", 2)),
                           reinterpret_cast<const uint16_t*>(Exact<int16_t>(sin, "sin", 2)),
                           {},
                           {},
                           0,
                           length,
                           reinterpret_cast<const uint16_t*>(ms),
                           reinterpret_cast<uint16_t*>(out)};
    for (size_t i = 0; i < layers_.size(); ++i) {
      const auto k = keys[i].cast<py::array>(), v = values[i].cast<py::array>();
      auto* kp = Exact<int16_t>(k, "keys", 4, true);
      auto* vp = Exact<int16_t>(v, "values", 4, true);
      if (k.shape(0) != batch || k.shape(1) != shape_.kv_heads || k.shape(3) != d ||
          v.shape(0) != batch || v.shape(1) != shape_.kv_heads || v.shape(2) != k.shape(2) ||
          v.shape(3) != d)
        throw InvalidArgument(
            Message("cache layer ", i, ": keys ", ShapeText(k), ", values ", ShapeText(v)));
      step.capacity = k.shape(2);
      step.keys.push_back(reinterpret_cast<uint16_t*>(kp));
      step.values.push_back(reinterpret_cast<uint16_t*>(vp));
    }
    py::gil_scoped_release release;
    lowbit::RunLlamaStack(shape_, layers_, final_norm_, step, threads, kernel_);
  }

 private:
  lowbit::LlamaShape shape_;
  py::list arrays_;  // keeps the weights' arrays alive
  py::array final_norm_array_;
  const uint16_t* final_norm_ = nullptr;
  std::string kernel_;
  std::vector<lowbit::LlamaLayer> layers_;
};

}  // namespace

void BindLowbit(py::module_& m) {
  m.def("lowbit_matmul", &Matmul, py::arg("x"), py::arg("bits"), py::arg("codes"),
        py::arg("scales"), py::arg("mins"), py::arg("n"), py::arg("out"), py::arg("threads"),
        py::arg("kernel") = "auto");
  m.def("lowbit_kernels", &lowbit::LowbitKernels);
  m.def(
      "fused_step_runs",
      [](int64_t head_dim, const std::string& kernel) {
        return lowbit::ChooseAttention(head_dim, kernel) != nullptr;
      },
      py::arg("head_dim"), py::arg("kernel") = "auto");
  py::class_<LlamaStack>(m, "LlamaStack")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, int64_t, float, const py::list&,
                    const py::array&, const std::string&>(),
           py::arg("hidden"), py::arg("heads"), py::arg("kv_heads"), py::arg("head_dim"),
           py::arg("intermediate"), py::arg("eps"), py::arg("layers"), py::arg("final_norm"),
           py::arg("kernel") = "auto")
      .def("forward", &LlamaStack::Forward, py::arg("x"), py::arg("batch"), py::arg("tokens"),
           py::arg("cos"), py::arg("sin"), py::arg("keys"), py::arg("values"), py::arg("length"),
           py::arg("mask"), py::arg("normed"), py::arg("threads"));
}

}  // namespace dl::bindings
