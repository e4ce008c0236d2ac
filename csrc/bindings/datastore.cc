// Binds dl::TokenDatastore as draftlattice._core.TokenDatastore (wrapped by
// draftlattice.datastore.Datastore). Type conversion only: the core checks the values.
#include "datastore.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings/convert.h"

namespace py = pybind11;

namespace dl::bindings {

namespace {

TokenDatastore Build(const py::object& tokens_obj, const py::object& offsets_obj,
                     const py::object& depth) {
  const auto tokens = TokenArray(tokens_obj, "tokens", 1, "[N]");
  const py::array offsets_array = ArrayArg(offsets_obj, "offsets", 1, "[R + 1]");
  if (offsets_array.size() > 0 && offsets_array.dtype().kind() != 'i' &&
      offsets_array.dtype().kind() != 'u')
    throw InvalidArgument(Message("offsets must be integers, got dtype ",
                                  py::str(offsets_array.dtype()).cast<std::string>()));
  const auto offsets = Converted<int64_t>(offsets_array, "offsets", "int64");
  std::vector<int32_t> token_copy(tokens.data(), tokens.data() + tokens.size());
  std::vector<int64_t> offset_copy(offsets.data(), offsets.data() + offsets.size());
  const int d = IntArg<int>(depth, "depth");
  py::gil_scoped_release release;  // sorting millions of suffixes takes seconds
  return TokenDatastore(token_copy, offset_copy, d);
}

std::vector<int32_t> Continuation(const TokenDatastore& store, const py::object& context,
                                  int max_ngram, int min_ngram, int length, int min_count) {
  const std::vector<int32_t> ids = TokenIds(context, "context");
  return store.Continuation(ids.data(), static_cast<int64_t>(ids.size()),
                            DatastoreQuery{max_ngram, min_ngram, length, min_count});
}

}  // namespace

void BindDatastore(py::module_& m) {
  py::class_<TokenDatastore>(m, "TokenDatastore")
      .def(py::init(&Build), py::arg("tokens"), py::arg("offsets"), py::arg("depth"))
      .def("continuation", &Continuation, py::arg("context"), py::arg("max_ngram"),
           py::arg("min_ngram"), py::arg("length"), py::arg("min_count"))
      .def_property_readonly("num_tokens", &TokenDatastore::num_tokens)
      .def_property_readonly("num_records", &TokenDatastore::num_records)
      .def_property_readonly("depth", &TokenDatastore::depth);
}

}  // namespace dl::bindings
