// Binds exact p-best rescoring (nbest.h), single and batched over a dl::TokenLm
// (draftlattice._core.NgramLM). The LM starts after a context's token ids or in a given LmState.
// The GIL is released around all compute; the core validates p, alpha, tokens and states.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <vector>

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

// The drafts as an instance of `type` (the public RescoreResult, a frozen dataclass) whose
// attributes tokens, scores, head_scores and lm_scores are set as object.__setattr__ sets them,
// without its __init__: that runs a Python frame and four object.__setattr__ calls, and building
// the object in Python cost about 0.5 us of a 1x1 lattice's call.
// Only classes defined in Python whose instances object.__new__ makes qualify: allocating a
// built-in type's instance this way may make objects it cannot free (None, bool).
py::object DraftsAs(const py::handle& type, const Drafts& d) {
  auto* cls = PyType_Check(type.ptr()) ? reinterpret_cast<PyTypeObject*>(type.ptr()) : nullptr;
  if (cls == nullptr || !PyType_HasFeature(cls, Py_TPFLAGS_HEAPTYPE) ||
      cls->tp_new != PyBaseObject_Type.tp_new)
    throw py::type_error(
        Message("result_type must be a Python class using object.__new__, got ", Repr(type)));
  const auto no_args = py::reinterpret_steal<py::object>(PyTuple_New(0));
  auto out = py::reinterpret_steal<py::object>(cls->tp_new(cls, no_args.ptr(), nullptr));
  if (!out) throw py::error_already_set();
  static PyObject* const names[] = {
      PyUnicode_InternFromString("tokens"), PyUnicode_InternFromString("scores"),
      PyUnicode_InternFromString("head_scores"), PyUnicode_InternFromString("lm_scores")};
  const py::object values[] = {ToNumpy(d.tokens, {d.n, d.h}), ToNumpy(d.scores, {d.n}),
                               ToNumpy(d.head_scores, {d.n}), ToNumpy(d.lm_scores, {d.n})};
  for (int i = 0; i < 4; ++i)
    if (PyObject_GenericSetAttr(out.ptr(), names[i], values[i].ptr()) != 0)
      throw py::error_already_set();
  return out;
}

// A tuple of the four arrays, or an instance of `result_type` when it is not None (DraftsAs).
py::object Rescore(const py::object& lattice_obj, const py::object& lm_obj, const py::object& p,
                   const py::object& alpha, const py::object& context, bool bos,
                   const py::object& result_type) {
  const Lattice& lattice = Bound<Lattice>(lattice_obj, "lattice", "draftlattice.Lattice");
  const TokenLm& lm = LmArg(lm_obj);
  const RescoreOptions options = Options(p, alpha, bos);
  const Start start = StartArg(context, bos);
  Drafts drafts;
  {
    py::gil_scoped_release release;
    drafts = Best(lattice, lm, start, options);
  }
  if (!result_type.is_none()) return DraftsAs(result_type, drafts);
  return DraftsToPython(drafts);
}

py::list RescoreBatch(const py::object& lattices_obj, const py::object& lm_obj, const py::object& p,
                      const py::object& alpha, const py::object& contexts, bool bos,
                      const py::object& num_threads, const py::object& memos_obj,
                      const py::object& result_type) {
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
  for (const auto& drafts : results)
    out.append(result_type.is_none() ? py::object(DraftsToPython(drafts))
                                     : DraftsAs(result_type, drafts));
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

// Median seconds of `repeats` searches of one lattice, timed inside C++ after one untimed run,
// from the LM state after the context (walked once, untimed). This is the work that
// bench/openfst/lmfst.cc times for OpenFST (composition + shortest paths on a built lattice from a
// start state), so the two can be compared without either side's call overhead.
double RescoreSeconds(const py::object& lattice_obj, const py::object& lm_obj, const py::object& p,
                      const py::object& alpha, const py::object& context, bool bos, int repeats) {
  const Lattice& lattice = Bound<Lattice>(lattice_obj, "lattice", "draftlattice.Lattice");
  const TokenLm& lm = LmArg(lm_obj);
  const RescoreOptions options = Options(p, alpha, bos);
  if (repeats < 1) throw InvalidArgument(Message("repeats must be >= 1, got ", repeats));
  Start start = StartArg(context, bos);
  std::vector<double> runs;
  {
    py::gil_scoped_release release;
    if (!start.has_state) {
      lm.CheckTokens(start.context.data(), start.context.size(), "context");
      start.state = lm.Start(start.context.data(), start.context.size(), bos);
      start.has_state = true;
    }
    Best(lattice, lm, start, options);
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      Best(lattice, lm, start, options);
      runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::nth_element(runs.begin(), runs.begin() + repeats / 2, runs.end());
  return runs[repeats / 2];
}

}  // namespace

void BindRescore(py::module_& m) {
  m.def("rescore", &Rescore, py::arg("lattice"), py::arg("lm"), py::arg("p"), py::arg("alpha"),
        py::arg("context"), py::arg("bos"), py::arg("result_type") = py::none());
  m.def("rescore_batch", &RescoreBatch, py::arg("lattices"), py::arg("lm"), py::arg("p"),
        py::arg("alpha"), py::arg("contexts"), py::arg("bos"), py::arg("num_threads"),
        py::arg("memos") = py::none(), py::arg("result_type") = py::none());
  m.def(
      "check_rescore_options",
      [](const py::object& p, const py::object& alpha) { Options(p, alpha, false).Validate(); },
      "Checks p and alpha as rescore does (for callers that take them long before rescoring).",
      py::arg("p"), py::arg("alpha"));
  m.def("rescore_stats", &RescoreStats,
        "Work counters of one rescore call: (nodes, arcs_scored, heap_pops).", py::arg("lattice"),
        py::arg("lm"), py::arg("p"), py::arg("alpha"), py::arg("context"), py::arg("bos"));
  m.def("rescore_seconds", &RescoreSeconds,
        "Median seconds of `repeats` rescore searches timed inside C++ (no call overhead; the "
        "context's LM state is walked once, untimed). For benchmarks.",
        py::arg("lattice"), py::arg("lm"), py::arg("p"), py::arg("alpha"), py::arg("context"),
        py::arg("bos"), py::arg("repeats"));
}

}  // namespace dl::bindings
