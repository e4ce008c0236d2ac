// The extension module draftlattice._core: one BindX per core concept, each in its own file in
// this folder, in data-flow order. Type conversion only.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace dl::bindings {
void BindErrors(py::module_& m);      // errors.h
void BindNgram(py::module_& m);       // ngram/
void BindLattice(py::module_& m);     // lattice.h
void BindRescore(py::module_& m);     // nbest.h
void BindBestNodes(py::module_& m);   // best_nodes.h: token trees under a node budget
void BindSample(py::module_& m);      // sample.h
void BindOracle(py::module_& m);      // oracle.h
void BindMemo(py::module_& m);        // lm_memo.h: LM answers kept across a decoding loop's steps
void BindLmBuild(py::module_& m);     // lmbuild/
void BindLowbit(py::module_& m);      // lowbit/: the lean step's low-bit matrix product
void BindDraftHeads(py::module_& m);  // lowbit/draft_heads.h: the lean step's draft heads
void BindDatastore(py::module_& m);   // datastore.h: retrieval drafts from a corpus
}  // namespace dl::bindings

PYBIND11_MODULE(_core, m) {
  m.doc() = "draftlattice C++ core (private: use the draftlattice package)";
  dl::bindings::BindErrors(m);
  dl::bindings::BindNgram(m);
  dl::bindings::BindLattice(m);
  dl::bindings::BindRescore(m);
  dl::bindings::BindBestNodes(m);
  dl::bindings::BindSample(m);
  dl::bindings::BindOracle(m);
  dl::bindings::BindMemo(m);
  dl::bindings::BindLmBuild(m);
  dl::bindings::BindLowbit(m);
  dl::bindings::BindDraftHeads(m);
  dl::bindings::BindDatastore(m);
}
