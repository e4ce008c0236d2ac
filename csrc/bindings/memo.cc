// Binds LmMemo (lm_memo.h): the LM answers (pair bounds, arc scores) a decoding loop's drafting
// calls share across steps; rescore_batch(..., memos=) takes one per row (rescore.cc).
#include <pybind11/pybind11.h>

#include "lm_memo.h"

namespace py = pybind11;

namespace dl::bindings {

void BindMemo(py::module_& m) {
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
}

}  // namespace dl::bindings
