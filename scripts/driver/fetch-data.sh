#!/usr/bin/env bash
# Downloads the data the labs use into DIR, checking each file's SHA-256.
#   scripts/driver/fetch-data.sh DIR
# The files, their canonical URLs and sums come from datasets/manifest.tsv (the one list; the C++
# code compiles in the same file). A file already in DIR with the right sum is kept (no download).
# A download goes to a temporary file in DIR, is verified, then renamed into place, so DIR never
# holds a partial or wrong file. Exit status: 0 all files present and correct, 1 a download failed
# or had the wrong sum, 2 bad usage.
# SPEEDLABS_MANIFEST overrides the manifest (the tests use it to point at local file:// URLs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
manifest="${SPEEDLABS_MANIFEST:-$root/datasets/manifest.tsv}"
me="fetch-data"

if [[ $# -ne 1 || "$1" == -* ]]; then
  echo "usage: scripts/driver/fetch-data.sh DIR   (downloads the files of datasets/manifest.tsv into DIR)" >&2
  exit 2
fi
dir="$1"
[[ -r "$manifest" ]] || { echo "$me: cannot read the manifest $manifest" >&2; exit 2; }

if command -v sha256sum >/dev/null; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null; then
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  echo "$me: neither sha256sum nor shasum is installed (Debian: coreutils)" >&2; exit 1
fi
if command -v curl >/dev/null; then
  download() { curl --fail --silent --show-error --location --retry 2 --connect-timeout 20 --output "$2" "$1"; }
elif command -v wget >/dev/null; then
  download() { wget --quiet --tries=3 --timeout=20 --output-document="$2" "$1"; }
else
  echo "$me: neither curl nor wget is installed (Debian: apt-get install curl)" >&2; exit 1
fi

partial=""
trap '[[ -n "$partial" ]] && rm -f "$partial"' EXIT
trap 'exit 130' INT TERM

failures=0
while IFS=$'\t' read -r path url sum; do
  [[ -z "$path" || "$path" == \#* ]] && continue
  target="$dir/$path"
  if [[ -f "$target" ]]; then
    if [[ "$(sha256 "$target")" == "$sum" ]]; then
      echo "$me: $path: present, SHA-256 ok"
      continue
    fi
    echo "$me: $path: present but its SHA-256 is wrong; downloading it again"
  fi
  mkdir -p "$(dirname "$target")"
  partial="$(mktemp "$target.partial.XXXXXX")"
  echo "$me: $path: downloading $url"
  if ! download "$url" "$partial"; then
    echo "$me: error: could not download $path from $url (offline?). Copy it to $target by hand, or" \
         "set SPEEDLABS_DATA_DIR to a directory that already holds the data (e.g. ../shared/datasets)." >&2
    rm -f "$partial"; partial=""
    failures=$((failures + 1))
    continue
  fi
  actual="$(sha256 "$partial")"
  if [[ "$actual" != "$sum" ]]; then
    echo "$me: error: $path downloaded from $url has SHA-256 $actual, expected $sum; not kept." >&2
    rm -f "$partial"; partial=""
    failures=$((failures + 1))
    continue
  fi
  chmod 0644 "$partial"
  mv -f "$partial" "$target"
  partial=""
  echo "$me: $path: downloaded, SHA-256 ok"
done < "$manifest"

if [[ $failures -gt 0 ]]; then
  echo "$me: $failures file(s) missing or wrong in $dir" >&2
  exit 1
fi
echo "$me: all data present in $dir"
