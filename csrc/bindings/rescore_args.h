// Arguments shared by the rescoring and sampling bindings: the options, the LM, and where the LM
// starts (token ids of a context, or an LmState). Type conversion only.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "bindings/convert.h"
#include "compose.h"
#include "lm_memo.h"
#include "ngram/token_lm.h"

namespace dl::bindings {

// The core validates p and alpha (RescoreOptions::Validate).
inline RescoreOptions Options(const pybind11::handle& p, const pybind11::handle& alpha, bool bos) {
  RescoreOptions options;
  options.p = IntArg(p, "p");
  options.alpha = RealArg(alpha, "alpha");
  options.bos = bos;
  return options;
}

inline const TokenLm& LmArg(const pybind11::handle& lm) {
  return Bound<TokenLm>(lm, "lm", "draftlattice.NgramLM");
}

// Where the LM starts: after the context's token ids (and <s> when bos), or in a given state.
struct Start {
  bool has_state = false;
  LmState state;
  std::vector<int32_t> context;
};

inline Start StartArg(const pybind11::handle& context, bool bos) {
  Start start;
  if (IsBound<LmState>(context)) {
    if (bos)
      throw InvalidArgument(
          "bos=True applies to token contexts: an LmState already holds its <s> "
          "(lm.start(context, bos=True))");
    start.has_state = true;
    start.state = Bound<LmState>(context, "context", "LmState");
  } else {
    start.context = TokenIds(context, "context");
  }
  return start;
}

// One Start per lattice; None = empty contexts.
inline std::vector<Start> StartsArg(const pybind11::object& contexts, size_t batch, bool bos) {
  if (contexts.is_none()) return std::vector<Start>(batch);
  const Py_ssize_t size = PySequence_Check(contexts.ptr()) ? PySequence_Size(contexts.ptr()) : -1;
  if (size < 0) {
    PyErr_Clear();
    throw pybind11::type_error(
        Message("contexts must be a sequence (one context per lattice), got ", TypeName(contexts)));
  }
  const auto items = contexts.cast<pybind11::sequence>();
  if (static_cast<size_t>(size) != batch)
    throw InvalidArgument(
        Message("got ", size, " contexts for ", batch, " lattices (one per sequence)"));
  std::vector<Start> out;
  out.reserve(batch);
  for (const auto& item : items) out.push_back(StartArg(item, bos));
  return out;
}

// The lattices of a batch (draftlattice._core.Lattice objects). `held` keeps a reference to
// each: with the GIL released another thread may empty the caller's list.
struct Lattices {
  pybind11::list held;
  std::vector<const Lattice*> pointers;
  size_t size() const { return pointers.size(); }
  const Lattice* operator[](size_t i) const { return pointers[i]; }
};

inline Lattices LatticesArg(const pybind11::object& lattices) {
  Lattices out;
  for (const auto& item : lattices.cast<pybind11::sequence>()) {
    out.pointers.push_back(&Bound<Lattice>(item, "lattices[i]", "draftlattice.Lattice"));
    out.held.append(item);
  }
  return out;
}

// An LmMemo (memo_lm.h), or null for None.
inline LmMemo* MemoArg(const pybind11::handle& memo, const char* name = "memo") {
  if (memo.is_none()) return nullptr;
  Bound<LmMemo>(memo, name, "LmMemo or None");  // the type check and its message
  return &memo.cast<LmMemo&>();
}

// One memo (or null) per lattice of a batch, all null for None; `held` keeps each alive while the
// GIL is released, as Lattices does.
struct Memos {
  pybind11::list held;
  std::vector<LmMemo*> pointers;
};

inline Memos MemosArg(const pybind11::object& memos, size_t batch) {
  Memos out;
  out.pointers.assign(batch, nullptr);
  if (memos.is_none()) return out;
  if (!PySequence_Check(memos.ptr()) || pybind11::isinstance<pybind11::str>(memos))
    throw pybind11::type_error(Message(
        "memos must be a sequence (one LmMemo or None per lattice), got ", TypeName(memos)));
  const auto items = memos.cast<pybind11::sequence>();
  if (items.size() != batch)
    throw InvalidArgument(
        Message("got ", items.size(), " memos for ", batch, " lattices (one per sequence)"));
  for (size_t i = 0; i < batch; ++i) {
    out.pointers[i] = MemoArg(items[i], "memos[i]");
    out.held.append(items[i]);
  }
  return out;
}

}  // namespace dl::bindings
