// The extension module draftlattice._core: registers exception translation, then one
// BindX per concept (each in its own file in this folder). Type conversion only.
#include <pybind11/pybind11.h>

#include "errors.h"

namespace py = pybind11;

namespace dl::bindings {
// One declaration per bindings file; keep in data-flow order.
void BindNgram(py::module_& m);
void BindLattice(py::module_& m);
void BindRescore(py::module_& m);
void BindLmBuild(py::module_& m);
}  // namespace dl::bindings

PYBIND11_MODULE(_core, m) {
  m.doc() = "draftlattice C++ core (private: use the draftlattice package)";
  static py::exception<dl::FormatError> format_error(m, "FormatError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const dl::FormatError& e) {
      py::set_error(format_error, e.what());
    } catch (const dl::InvalidArgument& e) {
      py::set_error(PyExc_ValueError, e.what());
    }
  });
  dl::bindings::BindNgram(m);
  dl::bindings::BindLattice(m);
  dl::bindings::BindRescore(m);
  dl::bindings::BindLmBuild(m);
}
