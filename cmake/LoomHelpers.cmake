# Target helpers: one per kind of target, so every target gets the same flags.
#
#   loom_add_library(NAME SOURCES a.cpp ... [TESTS x.test.cpp ...] [DEPS ...] [PRIVATE_DEPS ...])
#     -> static library loom_<name> (alias loom::<name>); tests -> <name>_tests (CTest).
#   loom_add_service(NAME BINARY loom-x SOURCES ... MAIN main.cpp [TESTS ...] [DEPS ...])
#     -> object library <name>_obj, executable bin/<binary>, tests svc_<name>_tests.
#   loom_add_bench(NAME SOURCES ... DEPS ...) -> bin/<name>
#   loom_add_test_exe(NAME SOURCES ... DEPS ... [LABELS ...]) -> doctest binary registered in CTest

set(LOOM_WARNINGS -Wall -Wextra)

function(loom_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LOOM_WARNINGS}>)
  target_include_directories(${tgt} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# doctest's implementation TU is slow: compile it once for every test binary.
add_library(loom_doctest_main OBJECT ${CMAKE_CURRENT_LIST_DIR}/doctest_main.cpp)
target_link_libraries(loom_doctest_main PUBLIC doctest::doctest)

# A test that cannot run on this machine (a kernel feature it lacks, no GPU)
# says so in a doctest MESSAGE starting "LOOM_TEST_SKIPPED: <why>" and returns:
# CTest then counts it as skipped, not passed. Never for something setup
# installs: a missing dependency fails.
set(LOOM_TEST_SKIP_PROPS SKIP_REGULAR_EXPRESSION "LOOM_TEST_SKIPPED: ")

function(loom_add_test_exe name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PROPERTIES" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE loom_doctest_main ${A_DEPS})
  loom_target_defaults(${name})
  doctest_discover_tests(${name} PROPERTIES ${LOOM_TEST_SKIP_PROPS} ${A_PROPERTIES})
endfunction()

function(loom_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;TESTS;DEPS;PRIVATE_DEPS;TEST_DEPS" ${ARGN})
  add_library(loom_${name} STATIC ${A_SOURCES})
  add_library(loom::${name} ALIAS loom_${name})
  target_link_libraries(loom_${name} PUBLIC ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS})
  loom_target_defaults(loom_${name})
  if(A_TESTS)
    loom_add_test_exe(${name}_tests SOURCES ${A_TESTS} DEPS loom_${name} ${A_PRIVATE_DEPS} ${A_TEST_DEPS})
  endif()
endfunction()

function(loom_add_service name)
  cmake_parse_arguments(A "" "BINARY;MAIN" "SOURCES;TESTS;DEPS" ${ARGN})
  add_library(${name}_obj OBJECT ${A_SOURCES})
  target_link_libraries(${name}_obj PUBLIC ${A_DEPS})
  loom_target_defaults(${name}_obj)
  add_executable(${A_BINARY} ${A_MAIN})
  target_link_libraries(${A_BINARY} PRIVATE ${name}_obj ${A_DEPS})
  loom_target_defaults(${A_BINARY})
  if(A_TESTS)
    loom_add_test_exe(svc_${name}_tests SOURCES ${A_TESTS} DEPS ${name}_obj ${A_DEPS})
  endif()
endfunction()

function(loom_add_bench name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  loom_target_defaults(${name})
endfunction()
