// CURVE keys and the ZAP allow-list handler that turns a client's public key
// into a principal. Key files: <dir>/<name>.pub (Z85 public key, 0644) and
// <dir>/<name>.key (Z85 secret key, 0600). Free functions are stateless and
// thread-safe; a zap_handler owns one REP socket served on its own thread.
//
// Why a ZAP handler at all: a CURVE server without one accepts ANY client key.
// make_curve_server also turns on ZMQ_ZAP_ENFORCE_DOMAIN, so a CURVE socket
// whose context has no handler refuses every client instead of admitting all.
#pragma once

#include "libs/status/status.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <zmq.hpp>

namespace loom::wire {

struct curve_keypair {
  std::string public_z85;  // 40 Z85 characters
  std::string secret_z85;  // 40 Z85 characters; never logged
};

// Tag for sockets WITHOUT CURVE. For benchmarks and tests that measure the
// cost of CURVE only; services never use it (ARCHITECTURE.md §3: CURVE on
// every TCP socket, loopback included).
struct bench_plaintext_t {
  explicit bench_plaintext_t() = default;
};
inline constexpr bench_plaintext_t bench_plaintext{};

// A fresh random keypair (libsodium via zmq_curve_keypair).
curve_keypair generate_keypair();

// true when `key` is 40 Z85 characters that decode to 32 bytes.
bool valid_z85_key(std::string_view key);
// A public key's 32 raw bytes and back (enrolment tokens carry the raw key as
// hex: Z85's alphabet needs shell quoting). invalid_argument when `z85` is not
// a key / `raw` is not 32 bytes.
result<std::string> key_bytes(std::string_view z85);
result<std::string> key_z85(std::string_view raw);

// Writes <dir>/<name>.pub (0644) and <dir>/<name>.key (0600) atomically,
// creating `dir` (0700) if needed. invalid_argument for a name with '/' or
// an invalid key.
status save_keypair(const std::string& dir, const std::string& name, const curve_keypair& kp);

// Reads <dir>/<name>.key (and <dir>/<name>.pub when present, which must match
// the public key derived from the secret). permission_denied when the .key
// file is readable by group or others; errors name the path.
result<curve_keypair> load_keypair(const std::string& dir, const std::string& name);

// Reads and validates <dir>/<name>.pub.
result<std::string> load_public_key(const std::string& dir, const std::string& name);

// public key (Z85) -> principal (the .pub file's stem, e.g. "edge-node-1").
using allow_list = std::map<std::string, std::string>;

// Every *.pub in `dir`. not_found for a missing dir; invalid_argument naming
// the file for a bad key; conflict when two files hold the same key.
result<allow_list> load_allow_list(const std::string& dir);

// Makes `socket` a CURVE server with ZAP domain `zap_domain` and
// ZMQ_ZAP_ENFORCE_DOMAIN on. REQUIRES: before bind; zap_domain non-empty; a
// zap_handler for the socket's context exists (else every client is refused).
// Throws zmq::error_t like cppzmq's setters (start-up misconfiguration).
void make_curve_server(zmq::socket_t& socket, const curve_keypair& server, std::string_view zap_domain);

// Makes `socket` a CURVE client of the server whose public key is given.
// REQUIRES: before connect.
void make_curve_client(zmq::socket_t& socket, const curve_keypair& mine,
                       std::string_view server_public_z85);

// The ZAP user id of a key that is not in the allow list, on a domain opened
// with zap_handler::admit_unknown_on(): an edge site that is not enrolled yet
// (the gateway lets it send only token-free requests: EnrolSiteRequest).
inline constexpr std::string_view unenrolled_principal = "unenrolled";

// The ZAP handler (RFC 27) for one context: admits mechanism CURVE with a key
// in the allow list on the expected domain and answers 200 with user id =
// principal; everything else gets 400. A second, "open" domain may be set:
// there a well-formed CURVE key outside the list is admitted too, as
// unenrolled_principal (the scheduler's ROUTER, where sites enrol).
//
// REQUIRES: construct it BEFORE any CURVE socket of `ctx` binds; it binds
// inproc://zeromq.zap.01 in its constructor (throws zmq::error_t if another
// handler of the same context already did). Destroy it before `ctx`.
// Thread-safe: set_allow_list and the counters may be called from any thread.
class zap_handler {
 public:
  zap_handler(zmq::context_t& ctx, allow_list allowed, std::string domain);
  ~zap_handler();  // stops and joins within ~poll_interval
  zap_handler(const zap_handler&) = delete;
  zap_handler& operator=(const zap_handler&) = delete;

  // Replaces the allow list; applies to handshakes from now on (established
  // connections stay up).
  void set_allow_list(allow_list allowed);
  // Whether some key of the current list maps to `principal`.
  bool admits_principal(std::string_view principal) const;
  // Sockets with ZAP domain `open_domain` also admit unknown keys, as
  // unenrolled_principal. REQUIRES: open_domain non-empty and not the handler's
  // own domain; called before such a socket binds.
  void admit_unknown_on(std::string open_domain);
  // Sockets with ZAP domain `own_domain` admit only this deployment's own
  // keys: an admitted key whose principal is an edge site's ("site:...") is
  // refused there (a service's event stream is for its own deployment).
  // REQUIRES: own_domain non-empty, not the handler's own or open domain.
  void admit_own_only_on(std::string own_domain);

  std::uint64_t accepted() const { return accepted_.load(); }
  std::uint64_t rejected() const { return rejected_.load(); }

 private:
  // How often the handler thread checks for stop: bounds destructor latency.
  static constexpr int poll_interval_ms = 50;

  void run();
  void answer_one();
  bool domain_ok(std::string_view domain) const;  // ours or the open one

  zmq::socket_t socket_;  // used only by thread_ once it has started
  const std::string domain_;
  mutable std::mutex mu_;
  allow_list allowed_;       // guarded by mu_
  std::string open_domain_;  // guarded by mu_; "" = none
  std::string own_domain_;   // guarded by mu_; "" = none
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::thread thread_;
};

// The ZAP user id (= principal) of the peer that sent `msg`, read with
// zmq_msg_gets(msg, "User-Id"); "" when the message carries none.
std::string peer_user_id(zmq::message_t& msg);

}  // namespace loom::wire
