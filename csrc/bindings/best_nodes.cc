// Binds the n best nodes of lattices' prefix trees (best_nodes.h), batched, with a dl::TokenLm
// (draftlattice._core.NgramLM) or without an LM. The GIL is released around the searches; the core
// validates nodes, alpha, tokens and states.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

#include "batch.h"
#include "best_nodes.h"
#include "bindings/convert.h"
#include "bindings/rescore_args.h"
#include "memo_lm.h"
#include "ngram/token_lm.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

NodeTree Search(const Lattice& lattice, const TokenLm* lm, const Start& start,
                const NodeTreeOptions& options, LmMemo* memo) {
  if (lm == nullptr) return BestNodes(lattice, lm, LmState(), options);
  return WithMemo(*lm, memo, [&](const auto& view) {
    if (start.has_state) return BestNodes(lattice, &view, start.state, options);
    return BestNodes(lattice, view, start.context.data(), start.context.size(), options);
  });
}

// One (parent, rank, depth, token, score) tuple of arrays per lattice.
py::list BestNodesBatch(const py::object& lattices_obj, const py::object& lm_obj,
                        const py::object& nodes, const py::object& alpha,
                        const py::object& contexts, bool bos, const py::object& num_threads,
                        const py::object& memos_obj) {
  const auto lattices = LatticesArg(lattices_obj);
  const TokenLm* lm = lm_obj.is_none() ? nullptr : &LmArg(lm_obj);
  NodeTreeOptions options;
  options.n = IntArg(nodes, "nodes");
  options.alpha = RealArg(alpha, "alpha");
  options.bos = bos;
  const auto starts = StartsArg(contexts, lattices.size(), bos);
  const int threads = ThreadsArg(num_threads);
  const Memos memos = MemosArg(memos_obj, lattices.size());
  std::vector<NodeTree> trees(lattices.size());
  {
    py::gil_scoped_release release;
    ParallelFor(static_cast<int64_t>(lattices.size()), threads, [&](int64_t b) {
      trees[b] = Search(*lattices[b], lm, starts[b], options, memos.pointers[b]);
    });
  }
  py::list out;
  for (const auto& t : trees) {
    const py::ssize_t n = t.size();
    out.append(py::make_tuple(ToNumpy(t.parent, {n}), ToNumpy(t.rank, {n}), ToNumpy(t.depth, {n}),
                              ToNumpy(t.token, {n}), ToNumpy(t.score, {n})));
  }
  return out;
}

}  // namespace

void BindBestNodes(py::module_& m) {
  m.def("best_nodes_batch", &BestNodesBatch, py::arg("lattices"), py::arg("lm"), py::arg("nodes"),
        py::arg("alpha"), py::arg("contexts"), py::arg("bos"), py::arg("num_threads"),
        py::arg("memos") = py::none());
}

}  // namespace dl::bindings
