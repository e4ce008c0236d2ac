// Binds p-best rescoring, exact draft sampling and oracle drafts (single and batched) over a
// dl::TokenLm (draftlattice._core.NgramLM). The GIL is released around all compute.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "batch.h"
#include "bindings/arrays.h"
#include "lattice.h"
#include "nbest.h"
#include "ngram/token_lm.h"
#include "oracle.h"
#include "sample.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

RescoreOptions Options(int64_t p, double alpha, bool bos) {
  RescoreOptions options;
  options.p = p;
  options.alpha = alpha;
  options.bos = bos;
  options.Validate();
  return options;
}

void CheckInputs(const TokenLm& lm, const Lattice& lattice, const std::vector<int32_t>& context) {
  lm.CheckTokens(context.data(), context.size(), "context");
  lm.CheckTokens(lattice.tokens.data(), lattice.tokens.size(), "lattice tokens");
}

py::tuple DraftsToPython(const Drafts& d) {
  return py::make_tuple(ToNumpy(d.tokens, {d.n, d.h}), ToNumpy(d.scores, {d.n}),
                        ToNumpy(d.head_scores, {d.n}), ToNumpy(d.lm_scores, {d.n}));
}

py::tuple SamplesToPython(const DraftSamples& s) {
  return py::make_tuple(ToNumpy(s.tokens, {s.n, s.h}), ToNumpy(s.q, {s.n, s.h, s.k}),
                        ToNumpy(s.logprobs, {s.n}), s.log_z);
}

std::vector<std::vector<int32_t>> Contexts(const std::vector<CArray<int32_t>>& contexts, size_t batch) {
  if (contexts.size() != batch)
    throw InvalidArgument(Message("got ", contexts.size(), " contexts for ", batch, " lattices"));
  std::vector<std::vector<int32_t>> out;
  for (const auto& context : contexts) out.push_back(ContextVector(context, "context"));
  return out;
}

py::tuple Rescore(const Lattice& lattice, const TokenLm& lm, int64_t p, double alpha,
                  const CArray<int32_t>& context_array, bool bos) {
  const RescoreOptions options = Options(p, alpha, bos);
  const auto context = ContextVector(context_array, "context");
  CheckInputs(lm, lattice, context);
  Drafts drafts;
  {
    py::gil_scoped_release release;
    drafts = BestDrafts(lattice, lm, context.data(), context.size(), options);
  }
  return DraftsToPython(drafts);
}

py::list RescoreBatch(const std::vector<const Lattice*>& lattices, const TokenLm& lm, int64_t p,
                      double alpha, const std::vector<CArray<int32_t>>& context_arrays, bool bos,
                      int threads) {
  const RescoreOptions options = Options(p, alpha, bos);
  const auto contexts = Contexts(context_arrays, lattices.size());
  for (size_t b = 0; b < lattices.size(); ++b) CheckInputs(lm, *lattices[b], contexts[b]);
  std::vector<Drafts> results(lattices.size());
  {
    py::gil_scoped_release release;
    ParallelFor(static_cast<int64_t>(lattices.size()), threads, [&](int64_t b) {
      results[b] = BestDrafts(*lattices[b], lm, contexts[b].data(), contexts[b].size(), options);
    });
  }
  py::list out;
  for (const auto& drafts : results) out.append(DraftsToPython(drafts));
  return out;
}

// The "other"-arc log-probs of one lattice ([h] float64, see sample.h), empty when absent.
std::vector<double> OtherLogprobs(const std::optional<CArray<double>>& array, const Lattice& lattice) {
  if (!array) return {};
  if (array->ndim() != 1 || array->shape(0) != lattice.h)
    throw InvalidArgument(Message("other_logprobs must have shape [h] = [", lattice.h, "], got ",
                                  array->ndim(), " dimensions of size ", array->ndim() ? array->shape(0) : 0));
  return std::vector<double>(array->data(), array->data() + lattice.h);
}

const double* OrNull(const std::vector<double>& values) { return values.empty() ? nullptr : values.data(); }

py::tuple Sample(const Lattice& lattice, const TokenLm& lm, int64_t n, double alpha,
                 const CArray<int32_t>& context_array, bool bos, uint64_t seed,
                 const std::optional<CArray<double>>& other_array) {
  const RescoreOptions options = Options(1, alpha, bos);
  const auto context = ContextVector(context_array, "context");
  CheckInputs(lm, lattice, context);
  const auto other = OtherLogprobs(other_array, lattice);
  DraftSamples samples;
  {
    py::gil_scoped_release release;
    samples = SampleDrafts(lattice, lm, context.data(), context.size(), options, n, seed, OrNull(other));
  }
  return SamplesToPython(samples);
}

py::list SampleBatch(const std::vector<const Lattice*>& lattices, const TokenLm& lm, int64_t n,
                     double alpha, const std::vector<CArray<int32_t>>& context_arrays, bool bos,
                     const std::vector<uint64_t>& seeds, int threads,
                     const std::optional<std::vector<CArray<double>>>& other_arrays) {
  const RescoreOptions options = Options(1, alpha, bos);
  const auto contexts = Contexts(context_arrays, lattices.size());
  if (seeds.size() != lattices.size())
    throw InvalidArgument(Message("got ", seeds.size(), " seeds for ", lattices.size(), " lattices"));
  if (n < 0) throw InvalidArgument(Message("number of samples must be >= 0, got ", n));
  if (other_arrays && other_arrays->size() != lattices.size())
    throw InvalidArgument(Message("got ", other_arrays->size(), " other_logprobs for ", lattices.size(), " lattices"));
  std::vector<std::vector<double>> others(lattices.size());
  for (size_t b = 0; b < lattices.size(); ++b) {
    CheckInputs(lm, *lattices[b], contexts[b]);
    if (other_arrays) others[b] = OtherLogprobs((*other_arrays)[b], *lattices[b]);
  }
  std::vector<DraftSamples> results(lattices.size());
  {
    py::gil_scoped_release release;
    ParallelFor(static_cast<int64_t>(lattices.size()), threads, [&](int64_t b) {
      results[b] = SampleDrafts(*lattices[b], lm, contexts[b].data(), contexts[b].size(), options, n,
                                seeds[b], OrNull(others[b]));
    });
  }
  py::list out;
  for (const auto& samples : results) out.append(SamplesToPython(samples));
  return out;
}

py::tuple Oracle(const std::vector<const Lattice*>& lattices, const CArray<int32_t>& references) {
  CheckNdim(references, 2, "reference", "[B, h]");
  const auto batch = static_cast<size_t>(references.shape(0));
  if (batch != lattices.size())
    throw InvalidArgument(Message("got ", batch, " references for ", lattices.size(), " lattices"));
  if (batch == 0) throw InvalidArgument("oracle needs at least one lattice");
  const auto h = references.shape(1);
  std::vector<int32_t> tokens;
  std::vector<int32_t> accepted;
  for (size_t b = 0; b < batch; ++b) {
    if (lattices[b]->h != h)
      throw InvalidArgument(Message("lattice ", b, " has h=", lattices[b]->h, " but the references have h=", h));
    OracleDraft draft = BestOracleDraft(*lattices[b], references.data() + b * h, static_cast<size_t>(h));
    tokens.insert(tokens.end(), draft.tokens.begin(), draft.tokens.end());
    accepted.push_back(draft.accepted);
  }
  return py::make_tuple(ToNumpy(tokens, {static_cast<py::ssize_t>(batch), h}),
                        ToNumpy(accepted, {static_cast<py::ssize_t>(batch)}));
}

}  // namespace

void BindRescore(py::module_& m) {
  m.def("rescore_stats", [](const Lattice& lattice, const TokenLm& lm, int64_t p, double alpha,
                            const CArray<int32_t>& context, bool bos) {
    const auto ctx = ContextVector(context, "context");
    py::gil_scoped_release release;
    const Drafts d = BestDrafts(lattice, lm, ctx.data(), ctx.size(), Options(p, alpha, bos));
    return std::make_tuple(d.nodes, d.arcs_scored, d.pops);
  }, "Work counters of one rescore call: (nodes, arcs_scored, heap_pops).",
        py::arg("lattice"), py::arg("lm"), py::arg("p"), py::arg("alpha"), py::arg("context"), py::arg("bos"));
  m.def("rescore", &Rescore, py::arg("lattice"), py::arg("lm"), py::arg("p"), py::arg("alpha"),
        py::arg("context"), py::arg("bos"));
  m.def("rescore_batch", &RescoreBatch, py::arg("lattices"), py::arg("lm"), py::arg("p"),
        py::arg("alpha"), py::arg("contexts"), py::arg("bos"), py::arg("num_threads"));
  m.def("sample_drafts", &Sample, py::arg("lattice"), py::arg("lm"), py::arg("n"), py::arg("alpha"),
        py::arg("context"), py::arg("bos"), py::arg("seed"), py::arg("other_logprobs") = py::none());
  m.def("sample_drafts_batch", &SampleBatch, py::arg("lattices"), py::arg("lm"), py::arg("n"),
        py::arg("alpha"), py::arg("contexts"), py::arg("bos"), py::arg("seeds"), py::arg("num_threads"),
        py::arg("other_logprobs") = py::none());
  m.def("oracle_drafts", &Oracle, py::arg("lattices"), py::arg("references"));
}

}  // namespace dl::bindings
