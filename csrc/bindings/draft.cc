// Binds one greedy drafting step of the lattice drafter in a single call: advance the committed
// text's LM state by the tokens accepted since the last step, build the top-k lattice of the
// heads' logits (or take the top k computed on the target's device), and return its p best
// drafts. Inside a decoding loop every Python/C++ crossing runs with cold caches right after the
// target's forward pass (measured: a 2 us call costs 20-40 us there), so the three calls the
// drafter made before cost more than their work.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <utility>
#include <vector>

#include "bindings/convert.h"
#include "bindings/rescore_args.h"
#include "lattice.h"
#include "lm_memo.h"
#include "memo_lm.h"
#include "nbest.h"
#include "ngram/token_lm.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

struct Step {
  const TokenLm* lm;
  LmState state;
  std::vector<int32_t> added;
  RescoreOptions options;
  LmMemo* memo;  // or null
};

Step StepArgs(const py::object& lm_obj, const LmState& state, const py::object& new_tokens,
              const py::object& p, const py::object& alpha, const py::object& memo_obj) {
  LmMemo* memo = MemoArg(memo_obj);
  Step step{&LmArg(lm_obj), state, TokenIds(new_tokens, "new_tokens"), Options(p, alpha, false),
            memo};
  step.lm->CheckState(state);
  step.lm->CheckTokens(step.added.data(), step.added.size(), "new_tokens");
  return step;
}

// (tokens int64 [n, g], the state after the new tokens); call without the GIL.
std::pair<std::vector<int64_t>, LmState> Run(const Step& step, const Lattice& lattice, int64_t* n) {
  const LmState after = step.lm->Advance(step.state, step.added.data(), step.added.size());
  const Drafts drafts = WithMemo(*step.lm, step.memo, [&](const auto& lm) {
    return BestDrafts(lattice, lm, after, step.options);
  });
  *n = drafts.n;
  return {std::vector<int64_t>(drafts.tokens.begin(), drafts.tokens.end()), after};
}

// The p best drafts of the top-k lattice of `logits` [g, V], rescored with the LM starting in
// `state` advanced by `new_tokens`.
py::tuple DraftFromLogits(const py::object& logits_obj, const py::object& k,
                          const py::object& temperature, const py::object& lm_obj,
                          const LmState& state, const py::object& new_tokens, const py::object& p,
                          const py::object& alpha, const py::object& memo) {
  const auto logits = FloatArray(logits_obj, "logits", 2, "[g, V]");
  const Step step = StepArgs(lm_obj, state, new_tokens, p, alpha, memo);
  const int top = IntArg<int>(k, "k");
  const auto t = static_cast<float>(RealArg(temperature, "temperature"));
  const auto g = static_cast<int>(logits.shape(0)), vocab = static_cast<int>(logits.shape(1));
  // Built with the GIL held, straight from the caller's array: no other Python thread can write
  // it meanwhile, and the copy Lattice.from_logits makes to release the GIL (112 KB per step at
  // V = 4096) costs more than the lattice's share of the GIL-free time would give back.
  // Shifted logits, not log-softmax: the same p best drafts up to near-ties (lattice.h), without
  // the pass that sums exp over the vocabulary.
  const Lattice lattice =
      Lattice::FromLogits(logits.data(), g, vocab, top, t, Lattice::Scores::kShiftedLogits);
  std::pair<std::vector<int64_t>, LmState> out;
  int64_t n = 0;
  {
    py::gil_scoped_release release;
    out = Run(step, lattice, &n);
  }
  return py::make_tuple(ToNumpy(out.first, {n, g}), out.second);
}

// The same from top-k candidates [g, k] computed elsewhere (e.g. on the target's device).
py::tuple DraftFromTopk(const py::object& tokens_obj, const py::object& logprobs_obj,
                        const py::object& lm_obj, const LmState& state,
                        const py::object& new_tokens, const py::object& p, const py::object& alpha,
                        const py::object& memo) {
  const TopkArrays topk = TopkArgs(tokens_obj, logprobs_obj, "[g, k]");
  const Step step = StepArgs(lm_obj, state, new_tokens, p, alpha, memo);
  const int g = topk.rows();
  const Lattice lattice = Lattice::FromTopk(topk.tokens.data(), topk.logprobs.data(), g, topk.k());
  std::pair<std::vector<int64_t>, LmState> out;
  int64_t n = 0;
  {
    py::gil_scoped_release release;
    out = Run(step, lattice, &n);
  }
  return py::make_tuple(ToNumpy(out.first, {n, g}), out.second);
}

}  // namespace

void BindDraft(py::module_& m) {
  py::class_<LmMemo>(m, "LmMemo",
                     "LM results (pair bounds, arc scores) kept across the drafting calls of one "
                     "decoding loop (lm_memo.h); any LM, one at a time.")
      .def(py::init<>())
      .def_property_readonly(
          "stats",
          [](const LmMemo& memo) {
            return py::dict(
                py::arg("pair_lookups") = memo.pair_lookups, py::arg("pair_hits") = memo.pair_hits,
                py::arg("arc_lookups") = memo.arc_lookups, py::arg("arc_hits") = memo.arc_hits);
          },
          "lookups and hits so far, of pair bounds and of arc scores");
  m.def("draft_from_logits", &DraftFromLogits,
        "(tokens int64 [n, g], state after new_tokens): the p best drafts of the top-k lattice of "
        "logits [g, V], the LM starting in `state` advanced by `new_tokens`; `memo` "
        "(an LmMemo or None) keeps LM results across calls.",
        py::arg("logits"), py::arg("k"), py::arg("temperature"), py::arg("lm"), py::arg("state"),
        py::arg("new_tokens"), py::arg("p"), py::arg("alpha"), py::arg("memo") = py::none());
  m.def("draft_from_topk", &DraftFromTopk,
        "draft_from_logits from top-k candidates: tokens [g, k] ids, logprobs [g, k] natural log.",
        py::arg("tokens"), py::arg("logprobs"), py::arg("lm"), py::arg("state"),
        py::arg("new_tokens"), py::arg("p"), py::arg("alpha"), py::arg("memo") = py::none());
}

}  // namespace dl::bindings
