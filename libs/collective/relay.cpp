#include "libs/collective/relay.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

namespace loom::collective::relay {
namespace {

using json = nlohmann::json;
constexpr std::uint32_t max_error_bytes = 1u << 16;

// Whole reads and writes on a blocking stream socket: false at its end or on an error.
bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t got = ::read(fd, c, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    c += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t put = ::send(fd, c, n, MSG_NOSIGNAL);  // a peer gone is an error here, not SIGPIPE
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    c += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

}  // namespace

status exchange(int fd, std::span<float> v) {
  const std::uint64_t n = v.size();
  if (n > max_floats) return make_error(errc::invalid_argument, "relayed all-reduce: " + std::to_string(n) +
                                                                    " floats is past the most one exchange carries");
  std::uint8_t ok = 0;
  if (!write_all(fd, &n, sizeof n) || !write_all(fd, v.data(), v.size_bytes()) || !read_all(fd, &ok, 1))
    return make_error(errc::unavailable, "relayed all-reduce: the process holding the group is gone");
  if (ok == 1) {
    if (!read_all(fd, v.data(), v.size_bytes()))
      return make_error(errc::unavailable, "relayed all-reduce: the process holding the group went in mid-answer");
    return ok_status();
  }
  std::uint32_t len = 0;
  if (ok != 0 || !read_all(fd, &len, sizeof len) || len > max_error_bytes)
    return make_error(errc::unavailable, "relayed all-reduce: a broken answer (neither sums nor an error)");
  std::string text(len, '\0');
  if (!read_all(fd, text.data(), len))
    return make_error(errc::unavailable, "relayed all-reduce: the process holding the group went in mid-answer");
  const json e = json::parse(text, nullptr, false);
  if (!e.is_object() || !e.contains("message") || !e["message"].is_string())
    return make_error(errc::unavailable, "relayed all-reduce: a broken error answer");
  const std::string code = e.value("code", json()).is_string() ? e["code"].get<std::string>() : "";
  return make_error(errc_from_string(code).value_or(errc::unavailable), e["message"].get<std::string>());
}

status serve_one(int fd, const std::function<status(std::span<float>)>& sum,
                 const std::function<void()>& before_answer) {
  std::uint64_t n = 0;
  if (!read_all(fd, &n, sizeof n)) return make_error(errc::unavailable, "relayed all-reduce: the member process is gone");
  if (n > max_floats)
    return make_error(errc::invalid_argument, "relayed all-reduce: the member asked for " + std::to_string(n) +
                                                  " floats, past the most one exchange carries");
  std::vector<float> v(static_cast<std::size_t>(n));
  if (!read_all(fd, v.data(), v.size() * sizeof(float)))
    return make_error(errc::unavailable, "relayed all-reduce: the member process went in mid-request");
  status st = sum ? sum(v) : make_error(errc::internal, "relayed all-reduce: no group to sum over");
  if (before_answer) before_answer();
  if (st) {
    const std::uint8_t ok = 1;
    if (!write_all(fd, &ok, 1) || !write_all(fd, v.data(), v.size() * sizeof(float)))
      return make_error(errc::unavailable, "relayed all-reduce: the member process is gone");
    return ok_status();
  }
  std::string why = json{{"code", std::string(to_string(st.code()))}, {"message", st.err().message}}.dump();
  if (why.size() > max_error_bytes) why = json{{"code", std::string(to_string(st.code()))},
                                               {"message", st.err().message.substr(0, 1000) + "..."}}.dump();
  const std::uint8_t failed = 0;
  const auto len = static_cast<std::uint32_t>(why.size());
  if (!write_all(fd, &failed, 1) || !write_all(fd, &len, sizeof len) || !write_all(fd, why.data(), why.size()))
    return make_error(errc::unavailable, "relayed all-reduce: the member process is gone");
  return ok_status();
}

}  // namespace loom::collective::relay
