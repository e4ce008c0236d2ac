// Binds exact draft sampling (sample.h), single and batched over a dl::TokenLm, optionally with
// the full-support "other" arcs (other_logprobs [h] per lattice). The GIL is released around all
// compute.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "batch.h"
#include "bindings/convert.h"
#include "bindings/rescore_args.h"
#include "lattice.h"
#include "ngram/token_lm.h"
#include "sample.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

RescoreOptions Options(double alpha, bool bos) {
  RescoreOptions options;
  options.alpha = alpha;
  options.bos = bos;
  options.Validate();
  return options;
}

// A 1-d int32 context (token ids) as a vector.
std::vector<int32_t> ContextVector(const CArray<int32_t>& context, const char* name) {
  if (context.ndim() != 1)
    throw InvalidArgument(
        Message(name, " must be 1-d token ids, got ", context.ndim(), " dimensions"));
  return std::vector<int32_t>(context.data(), context.data() + context.shape(0));
}

void CheckInputs(const TokenLm& lm, const Lattice& lattice, const std::vector<int32_t>& context) {
  lm.CheckTokens(context.data(), context.size(), "context");
  lm.CheckTokens(lattice.tokens.data(), lattice.tokens.size(), "lattice tokens");
}

std::vector<std::vector<int32_t>> Contexts(const std::vector<CArray<int32_t>>& contexts,
                                           size_t batch) {
  if (contexts.size() != batch)
    throw InvalidArgument(Message("got ", contexts.size(), " contexts for ", batch, " lattices"));
  std::vector<std::vector<int32_t>> out;
  for (const auto& context : contexts) out.push_back(ContextVector(context, "context"));
  return out;
}

py::tuple SamplesToPython(const DraftSamples& s) {
  return py::make_tuple(ToNumpy(s.tokens, {s.n, s.h}), ToNumpy(s.q, {s.n, s.h, s.k}),
                        ToNumpy(s.logprobs, {s.n}), s.log_z);
}

// The "other"-arc log-probs of one lattice ([h] float64, see sample.h), empty when absent.
std::vector<double> OtherLogprobs(const std::optional<CArray<double>>& array,
                                  const Lattice& lattice) {
  if (!array) return {};
  if (array->ndim() != 1 || array->shape(0) != lattice.h)
    throw InvalidArgument(Message("other_logprobs must have shape [h] = [", lattice.h, "], got ",
                                  array->ndim(), " dimensions of size ",
                                  array->ndim() ? array->shape(0) : 0));
  return std::vector<double>(array->data(), array->data() + lattice.h);
}

const double* OrNull(const std::vector<double>& values) {
  return values.empty() ? nullptr : values.data();
}

// `context`: token ids (int32 [n]) or an LmState of `lm` (then bos must be False).
py::tuple Sample(const Lattice& lattice, const TokenLm& lm, py::handle n_arg, py::handle alpha,
                 const py::object& context, bool bos, uint64_t seed,
                 const std::optional<CArray<double>>& other_array) {
  const int64_t n = IntArg<int64_t>(n_arg, "n");
  const RescoreOptions options = Options(RealArg(alpha, "alpha"), bos);
  const Start start = StartArg(context, bos);
  CheckInputs(lm, lattice, start.context);
  if (start.has_state) lm.CheckState(start.state);
  const auto other = OtherLogprobs(other_array, lattice);
  DraftSamples samples;
  {
    py::gil_scoped_release release;
    samples = start.has_state
                  ? SampleDrafts(lattice, lm, start.state, options, n, seed, OrNull(other))
                  : SampleDrafts(lattice, lm, start.context.data(), start.context.size(), options,
                                 n, seed, OrNull(other));
  }
  return SamplesToPython(samples);
}

py::list SampleBatch(const std::vector<const Lattice*>& lattices, const TokenLm& lm,
                     py::handle n_arg, py::handle alpha,
                     const std::vector<CArray<int32_t>>& context_arrays, bool bos,
                     const std::vector<uint64_t>& seeds, int threads,
                     const std::optional<std::vector<CArray<double>>>& other_arrays) {
  const int64_t n = IntArg<int64_t>(n_arg, "n");
  const RescoreOptions options = Options(RealArg(alpha, "alpha"), bos);
  const auto contexts = Contexts(context_arrays, lattices.size());
  if (seeds.size() != lattices.size())
    throw InvalidArgument(
        Message("got ", seeds.size(), " seeds for ", lattices.size(), " lattices"));
  if (n < 0) throw InvalidArgument(Message("number of samples must be >= 0, got ", n));
  if (other_arrays && other_arrays->size() != lattices.size())
    throw InvalidArgument(Message("got ", other_arrays->size(), " other_logprobs for ",
                                  lattices.size(), " lattices"));
  std::vector<std::vector<double>> others(lattices.size());
  for (size_t b = 0; b < lattices.size(); ++b) {
    CheckInputs(lm, *lattices[b], contexts[b]);
    if (other_arrays) others[b] = OtherLogprobs((*other_arrays)[b], *lattices[b]);
  }
  std::vector<DraftSamples> results(lattices.size());
  {
    py::gil_scoped_release release;
    ParallelFor(static_cast<int64_t>(lattices.size()), threads, [&](int64_t b) {
      results[b] = SampleDrafts(*lattices[b], lm, contexts[b].data(), contexts[b].size(), options,
                                n, seeds[b], OrNull(others[b]));
    });
  }
  py::list out;
  for (const auto& samples : results) out.append(SamplesToPython(samples));
  return out;
}

}  // namespace

void BindSample(py::module_& m) {
  m.def("sample_drafts", &Sample, py::arg("lattice"), py::arg("lm"), py::arg("n"), py::arg("alpha"),
        py::arg("context"), py::arg("bos"), py::arg("seed"),
        py::arg("other_logprobs") = py::none());
  m.def("sample_drafts_batch", &SampleBatch, py::arg("lattices"), py::arg("lm"), py::arg("n"),
        py::arg("alpha"), py::arg("contexts"), py::arg("bos"), py::arg("seeds"),
        py::arg("num_threads"), py::arg("other_logprobs") = py::none());
}

}  // namespace dl::bindings
