// Binds one greedy drafting step of the lattice drafter in a single call: advance the committed
// text's LM state by the tokens accepted since the last step, build the top-k lattice of the
// heads' logits, and return its p best drafts. Inside a decoding loop every Python/C++ crossing
// runs with cold caches right after the target's forward pass (measured: a 2 us call costs
// 20-40 us there), so the three calls the drafter made before cost more than their work.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "bindings/convert.h"
#include "bindings/rescore_args.h"
#include "lattice.h"
#include "nbest.h"
#include "ngram/token_lm.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

// Returns (tokens int64 [n, g], the state after `new_tokens`): the n = min(p, k^g) best drafts of
// the top-k lattice of `logits` [g, V], rescored with the LM starting in that state.
py::tuple DraftFromLogits(const py::object& logits_obj, const py::object& k,
                          const py::object& temperature, const py::object& lm_obj,
                          const LmState& state, const py::object& new_tokens, const py::object& p,
                          const py::object& alpha) {
  const auto logits = FloatArray(logits_obj, "logits", 2, "[g, V]");
  const TokenLm& lm = LmArg(lm_obj);
  const RescoreOptions options = Options(p, alpha, false);
  const int top = IntArg<int>(k, "k");
  const auto t = static_cast<float>(RealArg(temperature, "temperature"));
  lm.CheckState(state);
  const std::vector<int32_t> added = TokenIds(new_tokens, "new_tokens");
  lm.CheckTokens(added.data(), added.size(), "new_tokens");
  const auto g = static_cast<int>(logits.shape(0)), vocab = static_cast<int>(logits.shape(1));
  // A private copy of the logits, as Lattice.from_logits takes (another thread may write them).
  const std::vector<float> data(logits.data(), logits.data() + logits.size());
  LmState after;
  Drafts drafts;
  {
    py::gil_scoped_release release;
    after = lm.Advance(state, added.data(), added.size());
    const Lattice lattice = Lattice::FromLogits(data.data(), g, vocab, top, t);
    drafts = BestDrafts(lattice, lm, after, options);
  }
  const std::vector<int64_t> tokens(drafts.tokens.begin(), drafts.tokens.end());
  return py::make_tuple(ToNumpy(tokens, {drafts.n, drafts.h}), after);
}

}  // namespace

void BindDraft(py::module_& m) {
  m.def("draft_from_logits", &DraftFromLogits,
        "(tokens int64 [n, g], state after new_tokens): the p best drafts of the top-k lattice of "
        "logits [g, V], the LM starting in `state` advanced by `new_tokens`.",
        py::arg("logits"), py::arg("k"), py::arg("temperature"), py::arg("lm"), py::arg("state"),
        py::arg("new_tokens"), py::arg("p"), py::arg("alpha"));
}

}  // namespace dl::bindings
