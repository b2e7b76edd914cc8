// TCP endpoints: what a bind option and a peer address may be.
#include "libs/wire/endpoint.hpp"

#include <doctest/doctest.h>

using loom::wire::endpoint_use;
using loom::wire::valid_tcp_endpoint;

TEST_CASE("a connect endpoint needs tcp, a host and a port from 1 to 65535") {
  for (const char* ok : {"tcp://127.0.0.1:7450", "tcp://edge-2.example:1", "tcp://[::1]:65535"})
    CHECK_MESSAGE(valid_tcp_endpoint(ok, endpoint_use::connect), ok);
  for (const char* bad : {"", "127.0.0.1:7450", "udp://h:1", "tcp://:7450", "tcp://h", "tcp://h:", "tcp://h:0",
                          "tcp://h:65536", "tcp://h:+80", "tcp://h:80x", "tcp://h:99999999999", "tcp://*:7450",
                          "tcp://h:*", "tcp://a b:80", "tcp://h/x:80"})
    CHECK_FALSE_MESSAGE(valid_tcp_endpoint(bad, endpoint_use::connect), bad);
}

TEST_CASE("a bind endpoint may name every interface and a free port") {
  for (const char* ok : {"tcp://127.0.0.1:*", "tcp://*:7001", "tcp://0.0.0.0:7450", "tcp://*:*"})
    CHECK_MESSAGE(valid_tcp_endpoint(ok, endpoint_use::bind), ok);
  for (const char* bad : {"tcp://127.0.0.1", "tcp://:*", "ipc:///tmp/x", "tcp://h:0", "tcp://h:-1", "*:7001"})
    CHECK_FALSE_MESSAGE(valid_tcp_endpoint(bad, endpoint_use::bind), bad);
}
