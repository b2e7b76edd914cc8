# LOOM_FUZZ=ON: a clang build of the libFuzzer targets in tests/fuzz (issue 32
# item 2). Every library is compiled with coverage instrumentation for
# libFuzzer plus ASan and UBSan (UBSan not recoverable: any finding is fatal);
# the fuzz targets link the libFuzzer runtime. Build only `fuzz_targets` in
# such a tree (tests/fuzz/run.sh does): the rest of the project is not meant
# to be built with these flags. OFF (the default) changes nothing.
option(LOOM_FUZZ "Build the libFuzzer targets of tests/fuzz (clang, ASan, UBSan)" OFF)

if(LOOM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "LOOM_FUZZ=ON needs clang (libFuzzer): configure with "
      "-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14, or run tests/fuzz/run.sh")
  endif()
  # The fuzzers exercise host-side parsers only.
  set(LOOM_CUDA OFF CACHE STRING "Build CUDA/NCCL parts: AUTO, ON, OFF" FORCE)
  set(LOOM_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  add_compile_options(-fsanitize=fuzzer-no-link ${LOOM_FUZZ_SANITIZERS} -fno-omit-frame-pointer)
  add_link_options(${LOOM_FUZZ_SANITIZERS})
endif()
