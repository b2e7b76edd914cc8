# The emulated link and link estimates (libs/wire/link_*): pure, no ZeroMQ,
# so they build and test apart from the rest of libs/wire; included from
# libs/wire/CMakeLists.txt. shaped_queue (the socket seam) lives in loom::wire.
loom_add_library(wire_link
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/link_outages.cpp
    ${CMAKE_CURRENT_LIST_DIR}/link_shaper.cpp
    ${CMAKE_CURRENT_LIST_DIR}/link_spec.cpp
    ${CMAKE_CURRENT_LIST_DIR}/link_monitor.cpp
  TESTS
    ${CMAKE_CURRENT_LIST_DIR}/link_shaper.test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/link_spec.test.cpp
    ${CMAKE_CURRENT_LIST_DIR}/link_monitor.test.cpp
  DEPS loom::status)
