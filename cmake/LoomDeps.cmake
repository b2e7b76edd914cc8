# Every third-party package the build uses, found once; imported targets only.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# CAF 0.17 (Debian's libcaf-dev ships no CMake or pkg-config files).
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY NAMES caf_core REQUIRED)
find_library(CAF_IO_LIBRARY NAMES caf_io REQUIRED)
if(NOT TARGET CAF::core)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()

find_package(cppzmq REQUIRED)                 # target cppzmq (-> libzmq)
find_package(Protobuf REQUIRED)               # protobuf::libprotobuf, protobuf_generate()
find_package(OpenSSL 3 REQUIRED)              # OpenSSL::Crypto
find_package(prometheus-cpp CONFIG REQUIRED)  # prometheus-cpp::core / ::pull
find_package(nlohmann_json 3 REQUIRED)        # nlohmann_json::nlohmann_json
find_package(tomlplusplus REQUIRED)           # tomlplusplus::tomlplusplus (compiled .so)
# PkgConfig::HTTPLIB: Debian's cpp-httplib (compiled .so, with OpenSSL): the console's HTTPS server and the tests' client.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
find_package(doctest REQUIRED)                # doctest::doctest, doctest_discover_tests()
include(doctest)
