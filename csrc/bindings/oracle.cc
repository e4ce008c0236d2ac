// Binds oracle drafts (oracle.h): the best path through each lattice given reference tokens.
#include "oracle.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/convert.h"
#include "lattice.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

py::tuple Oracle(const std::vector<const Lattice*>& lattices, const py::object& references_obj) {
  const auto references = TokenArray(references_obj, "references", 2, "[B, h]");
  const auto batch = static_cast<size_t>(references.shape(0));
  if (batch != lattices.size())
    throw InvalidArgument(Message("got ", batch, " references for ", lattices.size(), " lattices"));
  if (batch == 0) throw InvalidArgument("oracle needs at least one lattice");
  const auto h = references.shape(1);
  std::vector<int32_t> tokens;
  std::vector<int32_t> accepted;
  for (size_t b = 0; b < batch; ++b) {
    if (lattices[b]->h != h)
      throw InvalidArgument(
          Message("lattice ", b, " has h=", lattices[b]->h, " but the references have h=", h));
    OracleDraft draft =
        BestOracleDraft(*lattices[b], references.data() + b * h, static_cast<size_t>(h));
    tokens.insert(tokens.end(), draft.tokens.begin(), draft.tokens.end());
    accepted.push_back(draft.accepted);
  }
  return py::make_tuple(ToNumpy(tokens, {static_cast<py::ssize_t>(batch), h}),
                        ToNumpy(accepted, {static_cast<py::ssize_t>(batch)}));
}

}  // namespace

void BindOracle(py::module_& m) {
  m.def("oracle_drafts", &Oracle, py::arg("lattices"), py::arg("references"));
}

}  // namespace dl::bindings
