# Developer shortcuts (tools: pip install ".[test,dev]"). `make dev` builds the extension in place
# (python/draftlattice/_core*.so) so that `PYTHONPATH=python pytest` tests the working tree
# without installing. `make format-check` checks the C++ against .clang-format.
BUILD ?= build/dev
.PHONY: dev test clean format-check ctest asan tsan fuzz fuzz-coverage
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
# libFuzzer harnesses (tools/fuzz/cc: ARPA reader, .dlm loader, lattice + p-best search, trainer
# input, retrieval datastore) built with clang, ASan and UBSan in build/fuzz, each run for FUZZ_SECONDS on one core
# from its seed corpus tools/fuzz/corpus/TARGET (read only; new inputs go to
# build/fuzz/corpus/TARGET, findings to build/fuzz/crash-*). Needs clang (apt-get install clang).
FUZZ_BUILD ?= build/fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= arpa dlm lattice counts datastore
FUZZ_OPTIONS ?= -timeout=10 -rss_limit_mb=2048
fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDL_FUZZ=ON \
	  -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(FUZZ_BUILD) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	for t in $(FUZZ_TARGETS); do mkdir -p $(FUZZ_BUILD)/corpus/$$t && \
	  $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_BUILD)/corpus/$$t tools/fuzz/corpus/$$t -max_total_time=$(FUZZ_SECONDS) \
	  $(FUZZ_OPTIONS) -artifact_prefix=$(FUZZ_BUILD)/ -print_final_stats=1 || exit 1; done
# Line and region coverage of the corpora `make fuzz` grew (llvm-cov; apt-get install llvm): the
# harnesses rebuilt with -fprofile-instr-generate in build/fuzz-cov, run once over each corpus.
FUZZ_COV_BUILD ?= build/fuzz-cov
fuzz-coverage:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_COV_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDL_FUZZ=ON \
	  -DDL_FUZZ_FLAGS="-fsanitize=fuzzer-no-link -fprofile-instr-generate -fcoverage-mapping" \
	  -DDL_FUZZ_LINK_FLAGS="-fsanitize=fuzzer -fprofile-instr-generate" -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(FUZZ_COV_BUILD) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	for t in $(FUZZ_TARGETS); do \
	  LLVM_PROFILE_FILE=$(FUZZ_COV_BUILD)/$$t.profraw $(FUZZ_COV_BUILD)/fuzz_$$t -runs=0 $(FUZZ_BUILD)/corpus/$$t tools/fuzz/corpus/$$t 2>/dev/null && \
	  llvm-profdata merge -sparse $(FUZZ_COV_BUILD)/$$t.profraw -o $(FUZZ_COV_BUILD)/$$t.profdata && \
	  echo "== $$t" && llvm-cov report $(FUZZ_COV_BUILD)/fuzz_$$t -instr-profile=$(FUZZ_COV_BUILD)/$$t.profdata \
	    -ignore-filename-regex='(^/usr/|tools/fuzz/)' | tail -1 || exit 1; done
# ThreadSanitizer build in build/tsan (a copy of the package, as for asan), then ctest and the
# pytest files that run threads (TSAN_TESTS): rescore_batch with and without memos, the lattice
# drafter's per-row memos, batched sampling, threads sharing one LM and heads in generate() and
# rescore_batch. Python is not built with TSan: the runtime is preloaded and reports only races
# between instrumented accesses (the core's); any report fails.
TSAN_BUILD ?= build/tsan
# (Not tests/test_hardening_core.py: a test there writes the caller's array from a Python thread
# while the core copies it, a race by design that the copy makes harmless.)
TSAN_TESTS ?= tests/test_rescore.py tests/test_lm_memo.py tests/test_lattice_drafting.py tests/test_sample.py tests/test_concurrency.py \
  tests/test_lowbit.py
# Reports go to files (pytest would swallow stderr at the abort) and are printed on failure.
# torch runs on one thread there: its OpenMP pool (libgomp) is not instrumented, so TSan cannot
# see its barriers and reports torch's own kernels (seen: TensorIterator's shape, written by the
# main thread and read by a gomp worker); the core's threads are not affected. Reports outside
# the package that TSan cannot judge are suppressed, each with its reason, in tools/sanitizers/tsan.supp.
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 abort_on_error=1 second_deadlock_stack=1 report_signal_unsafe=0 \
  log_path=$(abspath $(TSAN_BUILD))/tsan-report suppressions=$(abspath tools/sanitizers/tsan.supp)"
tsan:
	mkdir -p $(TSAN_BUILD)/python && rm -rf $(TSAN_BUILD)/python/draftlattice
	cp -r python/draftlattice $(TSAN_BUILD)/python/ && rm -f $(TSAN_BUILD)/python/draftlattice/_core*.so
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDL_TSAN=ON -DDL_BUILD_TESTS=ON \
	  -DDL_EXTENSION_DIR=$(abspath $(TSAN_BUILD))/python/draftlattice -Dpybind11_DIR=$$(python -m pybind11 --cmakedir) >/dev/null
	cmake --build $(TSAN_BUILD)
	rm -f $(TSAN_BUILD)/tsan-report.*
	$(TSAN_ENV) ctest --test-dir $(TSAN_BUILD) --output-on-failure || { cat $(TSAN_BUILD)/tsan-report.*; exit 1; }
	LD_PRELOAD=$$($(CXX) -print-file-name=libtsan.so) $(TSAN_ENV) OMP_NUM_THREADS=1 PYTHONPATH=$(TSAN_BUILD)/python \
	  python -m pytest -q -p no:cacheprovider $(TSAN_TESTS) || { cat $(TSAN_BUILD)/tsan-report.*; exit 1; }
	@! ls $(TSAN_BUILD)/tsan-report.* 2>/dev/null  # no report, even from a process that went on
clean:
	rm -rf build python/draftlattice/_core*.so
format-check:
	clang-format --dry-run --Werror $$(git ls-files 'csrc/*.h' 'csrc/*.cc' 'tools/fuzz/cc/*.h' 'tools/fuzz/cc/*.cc')
