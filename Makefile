# Developer shortcuts (tools: pip install ".[test,dev]"). `make dev` builds the extension in place
# (python/draftlattice/_core*.so) so that `PYTHONPATH=python pytest` tests the working tree
# without installing. `make format-check` checks the C++ against .clang-format.
BUILD ?= build/dev
.PHONY: dev test clean format-check
dev:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(BUILD)
test: dev
	PYTHONPATH=python python -m pytest
clean:
	rm -rf build python/draftlattice/_core*.so
format-check:
	clang-format --dry-run --Werror $$(git ls-files 'csrc/*.h' 'csrc/*.cc')
