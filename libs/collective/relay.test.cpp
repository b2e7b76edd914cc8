#include "libs/collective/relay.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

using namespace loom;
namespace relay = loom::collective::relay;

namespace {

// Both ends of a stream socketpair, closed at the end.
struct socket_pair {
  int child = -1, parent = -1;
  socket_pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    child = fds[0];
    parent = fds[1];
  }
  ~socket_pair() {
    if (child >= 0) ::close(child);
    if (parent >= 0) ::close(parent);
  }
  void close_parent() {
    ::close(parent);
    parent = -1;
  }
};

void put(int fd, const void* p, std::size_t n) { REQUIRE(::write(fd, p, n) == static_cast<ssize_t>(n)); }

}  // namespace

TEST_CASE("a relayed exchange carries the floats to the parent's sum and the sums back, bitwise, in order") {
  socket_pair sp;
  int answered = 0, told = 0;
  std::thread parent([&] {
    for (int k = 0; k < 3; ++k) {  // a member of a group of 2 whose other member holds the same values
      auto st = relay::serve_one(sp.parent, [&](std::span<float> v) {
        for (float& x : v) x += x;
        return ok_status();
      }, [&] { ++told; });
      CHECK(st.ok());
      ++answered;
    }
  });
  std::vector<float> big(1 << 20), small{0.1f, -3.5f, 1e-30f}, none;
  std::iota(big.begin(), big.end(), 0.25f);
  const std::vector<float> big_in = big, small_in = small;
  CHECK(relay::exchange(sp.child, big).ok());
  CHECK(relay::exchange(sp.child, small).ok());
  CHECK(relay::exchange(sp.child, none).ok());  // an empty exchange is one too
  parent.join();
  CHECK(answered == 3);
  CHECK(told == 3);  // before each answer
  for (std::size_t i = 0; i < big.size(); ++i) REQUIRE(big[i] == big_in[i] + big_in[i]);
  for (std::size_t i = 0; i < small.size(); ++i) {
    const float want = small_in[i] + small_in[i];
    CHECK(std::memcmp(&small[i], &want, sizeof want) == 0);
  }
}

TEST_CASE("the parent's failed exchange reaches the child with its code and message, and the relay goes on") {
  socket_pair sp;
  std::thread parent([&] {
    CHECK(relay::serve_one(sp.parent, [](std::span<float>) {
            return status(make_error(errc::unavailable, "trainer group: member 1 is gone (no frame for 5 s)"));
          }).ok());
    CHECK(relay::serve_one(sp.parent, [](std::span<float>) { return ok_status(); }).ok());
  });
  std::vector<float> v{1, 2, 3};
  auto st = relay::exchange(sp.child, v);
  REQUIRE(!st.ok());
  CHECK(st.code() == errc::unavailable);
  CHECK(st.err().message == "trainer group: member 1 is gone (no frame for 5 s)");
  CHECK(relay::exchange(sp.child, v).ok());
  parent.join();
}

TEST_CASE("a relay whose other end is gone or broken fails naming it, never hangs or takes a wrong answer") {
  SUBCASE("the parent gone: the child's exchange is unavailable") {
    socket_pair sp;
    sp.close_parent();
    std::vector<float> v{1, 2};
    auto st = relay::exchange(sp.child, v);
    CHECK(st.code() == errc::unavailable);
    CHECK(st.err().message.find("the process holding the group is gone") != std::string::npos);
  }
  SUBCASE("the child gone: the parent's serve fails") {
    socket_pair sp;
    ::close(sp.child);
    sp.child = -1;
    auto st = relay::serve_one(sp.parent, [](std::span<float>) { return ok_status(); });
    CHECK(st.code() == errc::unavailable);
  }
  SUBCASE("a count past the most one exchange carries is refused before any allocation") {
    socket_pair sp;
    const std::uint64_t n = relay::max_floats + 1;
    put(sp.child, &n, sizeof n);
    bool summed = false;
    auto st = relay::serve_one(sp.parent, [&](std::span<float>) {
      summed = true;
      return ok_status();
    });
    CHECK(st.code() == errc::invalid_argument);
    CHECK(st.err().message.find("4294967297 floats, past the most one exchange carries") != std::string::npos);
    CHECK(!summed);
  }
  SUBCASE("a request cut short") {
    socket_pair sp;
    const std::uint64_t n = 10;
    const float three[3] = {1, 2, 3};
    put(sp.child, &n, sizeof n);
    put(sp.child, three, sizeof three);
    ::close(sp.child);
    sp.child = -1;
    auto st = relay::serve_one(sp.parent, [](std::span<float>) { return ok_status(); });
    CHECK(st.code() == errc::unavailable);
    CHECK(st.err().message.find("went in mid-request") != std::string::npos);
  }
  SUBCASE("an answer that is neither sums nor an error") {
    socket_pair sp;
    const std::uint8_t seven = 7;
    put(sp.parent, &seven, 1);
    std::vector<float> v{1};
    auto st = relay::exchange(sp.child, v);
    CHECK(st.code() == errc::unavailable);
    CHECK(st.err().message.find("a broken answer") != std::string::npos);
    CHECK(v[0] == 1);
  }
  SUBCASE("an error answer whose JSON is broken") {
    socket_pair sp;
    const std::uint8_t zero = 0;
    const std::string junk = "{not json";
    const auto len = static_cast<std::uint32_t>(junk.size());
    put(sp.parent, &zero, 1);
    put(sp.parent, &len, sizeof len);
    put(sp.parent, junk.data(), junk.size());
    std::vector<float> v{1};
    auto st = relay::exchange(sp.child, v);
    CHECK(st.code() == errc::unavailable);
    CHECK(st.err().message.find("a broken error answer") != std::string::npos);
  }
}
