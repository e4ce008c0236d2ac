# Developer shortcuts (tools: pip install ".[test,dev]"). `make dev` builds the extension in place
# (python/draftlattice/_core*.so) so that `PYTHONPATH=python pytest` tests the working tree
# without installing. `make format-check` checks the C++ against .clang-format.
BUILD ?= build/dev
.PHONY: dev test clean format-check ctest asan
# C++ unit tests without Python (GoogleTest: apt-get install libgtest-dev), run by ctest.
CTEST_BUILD ?= build/ctest
# ASan+UBSan build of the extension and the C++ tests; then both test suites under it. Python
# is not built with ASan, so the runtime is preloaded (LD_PRELOAD=libasan) and leak checks are
# off (CPython's allocations look like leaks); ASAN_TESTS picks the pytest files (default all but
# the Spark engine's: the JVM that pyspark starts inherits LD_PRELOAD and does not start under the
# ASan runtime; the C++ those tests reach is the one-machine trainer's, covered by the others).
ASAN_BUILD ?= build/asan
ASAN_TESTS ?= --ignore=tests/test_spark_build.py
dev:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(BUILD)
test: dev
	PYTHONPATH=python python -m pytest
ctest:
	cmake -S . -B $(CTEST_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDL_BUILD_TESTS=ON -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(CTEST_BUILD) --target core_tests
	ctest --test-dir $(CTEST_BUILD) --output-on-failure
asan:
	mkdir -p $(ASAN_BUILD)/python && rm -rf $(ASAN_BUILD)/python/draftlattice
	cp -r python/draftlattice $(ASAN_BUILD)/python/ && rm -f $(ASAN_BUILD)/python/draftlattice/_core*.so
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDL_SANITIZE=ON -DDL_BUILD_TESTS=ON \
	  -DDL_EXTENSION_DIR=$(abspath $(ASAN_BUILD))/python/draftlattice -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(ASAN_BUILD)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure
	LD_PRELOAD=$$($(CXX) -print-file-name=libasan.so):$$($(CXX) -print-file-name=libubsan.so) \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  PYTHONPATH=$(ASAN_BUILD)/python python -m pytest -q -p no:cacheprovider $(ASAN_TESTS)
clean:
	rm -rf build python/draftlattice/_core*.so
format-check:
	clang-format --dry-run --Werror $$(git ls-files 'csrc/*.h' 'csrc/*.cc')
