# The emulated link and link estimates (libs/wire/link_*): pure, no ZeroMQ,
# so they build and test apart from the rest of libs/wire; included from
# libs/wire/CMakeLists.txt. The socket seam (shaped_queue, shaped_link) is
# loom::wire_shaped, shared by the client (loom::wire) and bulk (loom::wire_bulk).
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

loom_add_library(wire_shaped
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/shaped_queue.cpp
    ${CMAKE_CURRENT_LIST_DIR}/shaped_link.cpp
  DEPS loom::wire_link cppzmq)
