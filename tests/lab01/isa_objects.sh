#!/usr/bin/env bash
# tests/lab01/isa_objects.sh ISA ARCHIVE [ISA ARCHIVE ...]: reads lab 01's per-ISA builds of isa_sums.cpp
# (labs/01_vectorize/CMakeLists.txt). For each: it defines no symbol outside lab01::ISA:: (an Eigen function
# left out of line would be shared by name with the other builds, and the linker would keep one build's copy
# for all; the reference to C++'s exception personality routine is alike in every build), and its code uses
# the registers of its width: sse2 no VEX instruction and no ymm or zmm register, avx2 ymm and no zmm, avx512
# zmm.
set -u
status=0
fail() {
  printf '%s: %s\n' "$1" "$2" >&2
  status=1
}
while [[ $# -ge 2 ]]; do
  isa=$1 archive=$2
  shift 2
  # Global symbols only (local ones, t d b r, are never shared between files).
  foreign=$(nm -C --defined-only "$archive" | awk 'NF >= 3 && $2 !~ /^[tdbra]$/' | grep -v ":$" |
    grep -v " lab01::$isa::" | grep -v " DW.ref.__gxx_personality_v0$")
  [[ -z $foreign ]] ||
    fail "$isa" "defines symbols outside lab01::$isa:: (the linker may keep one build's copy for all): $foreign"
  code=$(objdump -d --no-show-raw-insn "$archive")
  mnemonics=$(awk -F'\t' 'NF >= 2 {split($2, word, " "); print word[1]}' <<<"$code")
  uses() { grep -q "%$1" <<<"$code"; }
  case $isa in
    sse2)
      ! uses ymm && ! uses zmm || fail sse2 "uses ymm or zmm registers"
      ! grep -q '^v' <<<"$mnemonics" || fail sse2 "uses VEX-encoded (AVX) instructions" ;;
    avx2)
      uses ymm || fail avx2 "uses no ymm register"
      ! uses zmm || fail avx2 "uses zmm registers" ;;
    avx512)
      uses zmm || fail avx512 "uses no zmm register" ;;
    *) fail "$isa" "unknown instruction set" ;;
  esac
  [[ $status -ne 0 ]] || echo "$isa: only lab01::$isa:: symbols, registers of its width: ok"
done
exit $status
