#!/usr/bin/env bash
# Builds KenLM's lmplz and build_binary for the benchmarks (bench/large_lm.py --lmplz), from the
# kenlm source distribution on PyPI (the same 0.3.0 release as the kenlm Python module; its
# wheel has no command-line tools). Bench-only: the tools go to bench/.cache/kenlm/bin, which
# git ignores; nothing here is part of draftlattice or its tests.
#
#   bench/tools/build_kenlm_tools.sh [MAX_ORDER]     (default 7: the orders bench/large_lm.py builds)
#
# Needs pip (the active Python's), cmake, a C++ compiler and the Boost (program_options, system,
# thread, test), zlib, bzip2 and xz development files; the Debian packages are installed with
# apt-get when a header is missing. Re-running reuses what is already built.
set -euo pipefail

max_order="${1:-7}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="$root/bench/.cache/kenlm"
version="0.3.0"
mkdir -p "$cache"

if [[ -x "$cache/bin/lmplz" && -x "$cache/bin/build_binary" && -f "$cache/bin/.max_order_$max_order" ]]; then
  echo "kenlm tools already built (max order $max_order): $cache/bin"
  exit 0
fi

needed=()
[[ -f /usr/include/boost/program_options.hpp ]] || needed+=(libboost-program-options-dev)
[[ -f /usr/include/boost/system/error_code.hpp ]] || needed+=(libboost-system-dev)
[[ -f /usr/include/boost/thread.hpp ]] || needed+=(libboost-thread-dev)
[[ -f /usr/include/boost/test/unit_test.hpp ]] || needed+=(libboost-test-dev)
[[ -f /usr/include/zlib.h ]] || needed+=(zlib1g-dev)
[[ -f /usr/include/bzlib.h ]] || needed+=(libbz2-dev)
[[ -f /usr/include/lzma.h ]] || needed+=(liblzma-dev)
if ((${#needed[@]})); then
  echo "installing ${needed[*]}"
  sudo_cmd=()
  [[ "$(id -u)" == 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${needed[@]}"
fi

sdist="$cache/kenlm-$version.tar.gz"
if [[ ! -f "$sdist" ]]; then
  python -m pip download "kenlm==$version" --no-deps --no-binary kenlm --no-build-isolation -d "$cache"
fi
rm -rf "$cache/src" "$cache/build"
mkdir -p "$cache/src"
tar xzf "$sdist" -C "$cache/src" --strip-components=1

# Only the two tools: Release, no Python module, no tests.
cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DKENLM_MAX_ORDER="$max_order" \
  -DENABLE_PYTHON=OFF -DCOMPILE_TESTS=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5
cmake --build "$cache/build" --target lmplz build_binary -j "$(nproc)"

mkdir -p "$cache/bin"
rm -f "$cache/bin"/.max_order_*
cp "$cache/build/bin/lmplz" "$cache/build/bin/build_binary" "$cache/bin/"
touch "$cache/bin/.max_order_$max_order"
echo "built $cache/bin/lmplz and $cache/bin/build_binary (KENLM_MAX_ORDER=$max_order)"
