# cmake/Fuzzing.cmake - the libFuzzer build (MEGATRAIN_FUZZ=ON, clang only; docs/fuzzing.md).
# Every library is compiled with coverage and the sanitizers, so a fuzz target
# sees edges and memory errors inside the readers it calls; only the targets
# themselves (tests/fuzz/) link libFuzzer's main.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "MEGATRAIN_FUZZ needs clang (libFuzzer); this build uses "
    "${CMAKE_CXX_COMPILER_ID}. Configure with CC=clang-19 CXX=clang++-19 (scripts/fuzz.sh does).")
endif()
# vptr is left out: the MLIR side is built without RTTI. No recovery: any
# undefined behaviour is a crash libFuzzer records.
set(MEGATRAIN_SANITIZERS address,undefined)
add_compile_options(-fsanitize=fuzzer-no-link,${MEGATRAIN_SANITIZERS} -fno-sanitize=vptr
  -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=${MEGATRAIN_SANITIZERS} -fno-sanitize=vptr)
