// ZAP handler (RFC 27, ZMTP Authentication Protocol). libzmq sends one
// request per handshake to inproc://zeromq.zap.01:
//   [version "1.0"][request id][domain][address][routing id][mechanism][credentials...]
// and expects
//   [version "1.0"][request id][status "200"|"400"|"500"][text][user id][metadata]
#include "libs/wire/curve.hpp"

#include <array>
#include <vector>
#include <zmq_addon.hpp>

namespace loom::wire {
namespace {

constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";
constexpr std::size_t curve_public_key_bytes = 32;

std::string z85_of(const zmq::message_t& raw_key) {
  std::array<char, 41> out{};
  zmq_z85_encode(out.data(), raw_key.data<std::uint8_t>(), raw_key.size());
  return std::string(out.data(), 40);
}

}  // namespace

zap_handler::zap_handler(zmq::context_t& ctx, allow_list allowed, std::string domain)
    : socket_(ctx, zmq::socket_type::rep), domain_(std::move(domain)), allowed_(std::move(allowed)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind(zap_endpoint);  // before the thread: bound when the constructor returns
  thread_ = std::thread([this] { run(); });
}

zap_handler::~zap_handler() {
  stop_ = true;
  thread_.join();
}

void zap_handler::set_allow_list(allow_list allowed) {
  std::lock_guard lock(mu_);
  allowed_ = std::move(allowed);
}

bool zap_handler::admits_principal(std::string_view principal) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, who] : allowed_)
    if (who == principal) return true;
  return false;
}

void zap_handler::admit_unknown_on(std::string open_domain) {
  std::lock_guard lock(mu_);
  open_domain_ = std::move(open_domain);
}

void zap_handler::admit_own_only_on(std::string own_domain) {
  std::lock_guard lock(mu_);
  own_domain_ = std::move(own_domain);
}

void zap_handler::run() {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop_) {
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(poll_interval_ms)) > 0) answer_one();
    } catch (const zmq::error_t& e) {
      // ETERM: the context is being terminated (the caller broke the
      // destroy-before-ctx rule): stop. EINTR: poll again.
      if (e.num() == ETERM) return;
    }
  }
}

bool zap_handler::domain_ok(std::string_view domain) const {
  if (domain == domain_) return true;
  std::lock_guard lock(mu_);
  return (!open_domain_.empty() && domain == open_domain_) || (!own_domain_.empty() && domain == own_domain_);
}

void zap_handler::answer_one() {
  std::vector<zmq::message_t> req;
  zmq::message_t part;
  do {
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) return;
    req.push_back(std::move(part));
  } while (req.back().more());

  // A REP socket must answer every request before it can read the next one.
  std::string code = "400", text = "not allowed", user;
  if (req.size() < 6 || req[0].to_string_view() != "1.0") {
    code = "500";
    text = "malformed ZAP request";
  } else if (!domain_ok(req[2].to_string_view())) {
    text = "wrong ZAP domain";
  } else if (req[5].to_string_view() != "CURVE") {
    text = "only CURVE is accepted";
  } else if (req.size() < 7 || req[6].size() != curve_public_key_bytes) {
    text = "malformed CURVE credentials";
  } else {
    std::lock_guard lock(mu_);
    const auto it = allowed_.find(z85_of(req[6]));
    if (it != allowed_.end() && !own_domain_.empty() && req[2].to_string_view() == own_domain_ &&
        it->second.rfind("site:", 0) == 0) {
      text = "an edge site's key on a socket of this deployment's own";
    } else if (it != allowed_.end()) {
      code = "200";
      text = "OK";
      user = it->second;
    } else if (!open_domain_.empty() && req[2].to_string_view() == open_domain_) {
      code = "200";
      text = "OK (not enrolled)";
      user = unenrolled_principal;
    } else {
      text = "unknown key";
    }
  }
  ++(code == "200" ? accepted_ : rejected_);

  std::string request_id = req.size() > 1 ? req[1].to_string() : std::string();
  std::array<zmq::const_buffer, 6> rep = {zmq::str_buffer("1.0"), zmq::buffer(request_id),
                                          zmq::buffer(code),       zmq::buffer(text),
                                          zmq::buffer(user),       zmq::const_buffer{}};
  zmq::send_multipart(socket_, rep, zmq::send_flags::dontwait);
}

}  // namespace loom::wire
