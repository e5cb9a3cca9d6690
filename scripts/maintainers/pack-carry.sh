#!/usr/bin/env bash
# Packs what a bare GPU machine lacks into .carry/ (git-ignored), so scripts/maintainers/gpu-bench.sh can build
# there without internet: the header-only libraries (Eigen3, CLI11, nlohmann_json) with their CMake
# config files, GoogleTest, OpenSSL's libcrypto (datasets/), pkgconf, and the data files.
#
#   scripts/maintainers/pack-carry.sh            # from this machine's /usr and $SPEEDLABS_DATA_DIR (or <repo>/data)
#
# The layout under .carry/prefix mirrors /usr, so the CMake config files, which locate their headers
# relative to themselves, work unchanged; the pkg-config files are rewritten to be relocatable.
# Then copy .carry/ (about 25 MiB) to the GPU machine beside the checkout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carry="$root/.carry"
prefix="$carry/prefix"
arch=$(gcc -print-multiarch 2>/dev/null || true)
arch=${arch:-x86_64-linux-gnu}
data_dir=${SPEEDLABS_DATA_DIR:-$root/data}

copy() {  # copy SOURCE (file or folder) to the same path under $prefix, SOURCE relative to /usr
  local source="/usr/$1"
  [[ -e "$source" ]] || { echo "pack-carry: /usr/$1 not found (install the -dev package)" >&2; exit 3; }
  mkdir -p "$prefix/$(dirname "$1")"
  cp -a "$source" "$prefix/$(dirname "$1")/"
}

rm -rf "$carry"
mkdir -p "$prefix" "$carry/bin"
# Header-only libraries and their CMake packages (Eigen's unsupported/ modules are not used).
copy include/eigen3/Eigen
copy include/eigen3/signature_of_eigen3_matrix_library
copy share/eigen3/cmake
copy include/CLI
copy share/cmake/CLI11
copy include/nlohmann
copy share/cmake/nlohmann_json
# GoogleTest (static libraries) for the tests.
copy include/gtest
copy include/gmock
copy "lib/$arch/cmake/GTest"
for lib in libgtest.a libgtest_main.a libgmock.a libgmock_main.a; do copy "lib/$arch/$lib"; done
# libcrypto (the data files' SHA-256).
copy include/openssl
cp -a "/usr/include/$arch/openssl/." "$prefix/include/openssl/"  # Debian keeps two headers per architecture
for lib in libcrypto.so libcrypto.so.3 libssl.so libssl.so.3; do
  copy "lib/$arch/$lib"
done
for pc in libcrypto.pc libssl.pc openssl.pc; do
  copy "lib/$arch/pkgconfig/$pc"
  sed -i 's|^prefix=.*|prefix=${pcfiledir}/../../..|' "$prefix/lib/$arch/pkgconfig/$pc"
done
# pkg-config itself (CMake's FindPkgConfig needs the program), with its one library.
cp -a "$(readlink -f "$(command -v pkg-config)")" "$carry/bin/pkg-config"
cp -a /usr/lib/"$arch"/libpkgconf.so.* "$carry/bin/"
# The data (a few MiB), checked against the manifest's sums on the GPU machine as everywhere.
if [[ -d "$data_dir/tinyshakespeare" && -d "$data_dir/gpt2" ]]; then
  mkdir -p "$carry/data"
  cp -a "$data_dir/tinyshakespeare" "$data_dir/gpt2" "$carry/data/"
  [[ -f "$data_dir/SHA256SUMS" ]] && cp -a "$data_dir/SHA256SUMS" "$carry/data/"
else
  echo "pack-carry: no data in $data_dir (set SPEEDLABS_DATA_DIR); the GPU run will need it" >&2
fi
echo "pack-carry: $(du -sh "$carry" | cut -f1) in $carry"
