# Developer shortcuts. `make dev` builds the extension in place (python/draftlattice/_core*.so)
# so that `PYTHONPATH=python pytest` tests the working tree without installing.
BUILD ?= build/dev
.PHONY: dev test clean
dev:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(BUILD)
test: dev
	PYTHONPATH=python python -m pytest
clean:
	rm -rf build python/draftlattice/_core*.so
