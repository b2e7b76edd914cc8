# Chunked, resumable, verified bulk transfer (libs/wire/bulk_*). Kept in its own
# file so it builds apart from the rest of libs/wire; included from
# libs/wire/CMakeLists.txt.
loom_add_library(wire_bulk
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/bulk_pieces.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bulk_receiver.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bulk_sender.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bulk_transport.cpp
  TESTS ${CMAKE_CURRENT_LIST_DIR}/bulk.test.cpp ${CMAKE_CURRENT_LIST_DIR}/bulk_pieces.test.cpp
  DEPS loom::status loom::crypto loom::files loom::proto loom::wire_shaped loom::auth cppzmq)
