// Translates the core's typed errors (errors.h) to Python exceptions with the same message:
// InvalidArgument -> ValueError, FormatError -> draftlattice.FormatError (a ValueError),
// FileError -> OSError built from (errno, message), so that Python picks FileNotFoundError,
// FileExistsError, PermissionError, ... as it does for its own file errors.
#include "errors.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace dl::bindings {

void BindErrors(py::module_& m) {
  static py::exception<FormatError> format_error(m, "FormatError", PyExc_ValueError);
  format_error.doc() = "A file's content is malformed, truncated or corrupted (a ValueError).";
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const FormatError& e) {
      py::set_error(format_error, e.what());
    } catch (const FileError& e) {
      py::object os_error =
          py::reinterpret_borrow<py::object>(PyExc_OSError)(e.error_number(), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(os_error.ptr())), os_error.ptr());
    } catch (const InvalidArgument& e) {
      py::set_error(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace dl::bindings
