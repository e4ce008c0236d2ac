// Binds exact p-best rescoring (nbest.h), single and batched over a dl::TokenLm
// (draftlattice._core.NgramLM). The LM starts after a context's token ids or in a given LmState.
// The GIL is released around all compute; the core validates p, alpha, tokens and states.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "batch.h"
#include "bindings/convert.h"
#include "bindings/rescore_args.h"
#include "lattice.h"
#include "memo_lm.h"
#include "nbest.h"
#include "ngram/token_lm.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

// With `memo` (may be null) when it is free (memo_lm.h).
Drafts Best(const Lattice& lattice, const TokenLm& lm, const Start& start,
            const RescoreOptions& options, LmMemo* memo = nullptr) {
  return WithMemo(lm, memo, [&](const auto& view) {
    if (start.has_state) return BestDrafts(lattice, view, start.state, options);
    return BestDrafts(lattice, view, start.context.data(), start.context.size(), options);
  });
}

py::tuple DraftsToPython(const Drafts& d) {
  return py::make_tuple(ToNumpy(d.tokens, {d.n, d.h}), ToNumpy(d.scores, {d.n}),
                        ToNumpy(d.head_scores, {d.n}), ToNumpy(d.lm_scores, {d.n}));
}

py::tuple Rescore(const py::object& lattice_obj, const py::object& lm_obj, const py::object& p,
                  const py::object& alpha, const py::object& context, bool bos) {
  const Lattice& lattice = Bound<Lattice>(lattice_obj, "lattice", "draftlattice.Lattice");
  const TokenLm& lm = LmArg(lm_obj);
  const RescoreOptions options = Options(p, alpha, bos);
  const Start start = StartArg(context, bos);
  Drafts drafts;
  {
    py::gil_scoped_release release;
    drafts = Best(lattice, lm, start, options);
  }
  return DraftsToPython(drafts);
}

py::list RescoreBatch(const py::object& lattices_obj, const py::object& lm_obj, const py::object& p,
                      const py::object& alpha, const py::object& contexts, bool bos,
                      const py::object& num_threads, const py::object& memos_obj) {
  const auto lattices = LatticesArg(lattices_obj);
  const TokenLm& lm = LmArg(lm_obj);
  const RescoreOptions options = Options(p, alpha, bos);
  const auto starts = StartsArg(contexts, lattices.size(), bos);
  const int threads = ThreadsArg(num_threads);
  const Memos memos = MemosArg(memos_obj, lattices.size());
  std::vector<Drafts> results(lattices.size());
  {
    py::gil_scoped_release release;
    ParallelFor(static_cast<int64_t>(lattices.size()), threads, [&](int64_t b) {
      results[b] = Best(*lattices[b], lm, starts[b], options, memos.pointers[b]);
    });
  }
  py::list out;
  for (const auto& drafts : results) out.append(DraftsToPython(drafts));
  return out;
}

py::tuple RescoreStats(const py::object& lattice_obj, const py::object& lm_obj, const py::object& p,
                       const py::object& alpha, const py::object& context, bool bos) {
  const Lattice& lattice = Bound<Lattice>(lattice_obj, "lattice", "draftlattice.Lattice");
  const TokenLm& lm = LmArg(lm_obj);
  const RescoreOptions options = Options(p, alpha, bos);
  const Start start = StartArg(context, bos);
  Drafts d;
  {
    py::gil_scoped_release release;
    d = Best(lattice, lm, start, options);
  }
  return py::make_tuple(d.nodes, d.arcs_scored, d.pops);
}

}  // namespace

void BindRescore(py::module_& m) {
  m.def("rescore", &Rescore, py::arg("lattice"), py::arg("lm"), py::arg("p"), py::arg("alpha"),
        py::arg("context"), py::arg("bos"));
  m.def("rescore_batch", &RescoreBatch, py::arg("lattices"), py::arg("lm"), py::arg("p"),
        py::arg("alpha"), py::arg("contexts"), py::arg("bos"), py::arg("num_threads"),
        py::arg("memos") = py::none());
  m.def(
      "check_rescore_options",
      [](const py::object& p, const py::object& alpha) { Options(p, alpha, false).Validate(); },
      "Checks p and alpha as rescore does (for callers that take them long before rescoring).",
      py::arg("p"), py::arg("alpha"));
  m.def("rescore_stats", &RescoreStats,
        "Work counters of one rescore call: (nodes, arcs_scored, heap_pops).", py::arg("lattice"),
        py::arg("lm"), py::arg("p"), py::arg("alpha"), py::arg("context"), py::arg("bos"));
}

}  // namespace dl::bindings
