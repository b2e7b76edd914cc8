// collective: data-parallel gradient all-reduce between trainer processes over
// ZeroMQ (CURVE on every socket, ARCHITECTURE.md §3). A ring all-reduce
// (reduce-scatter, then all-gather): each member sends 2·(W-1)/W of the buffer
// whatever the world size W, and the sum is deterministic — chunk c is always
// added up in the same ring order, so every member gets the same bits and a
// rerun with the same world gets the same bits again (kill -9 resumes stay
// bitwise equal).
//
//   inbox:  one per process, bound once (tcp://HOST:*), its endpoint and the
//           process's public key announced to the scheduler; receives the
//           previous rank's chunks for whatever group is current.
//   group:  one formation of a gang (rank, world, members by rank, generation);
//           a PUSH to the next rank. A new formation (a member restarted, the
//           gang grew or shrank) is a new generation: stale messages are dropped.
//
// Ownership: the caller owns both; a group borrows its inbox, which must
// outlive it. Thread-safety: an inbox and the group using it belong to one
// thread (the training thread); `stop` may be set from any thread.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zmq {
class context_t;
}

namespace loom::collective {

struct member {
  std::string endpoint;    // the member's inbox: tcp://127.0.0.1:PORT
  std::string public_key;  // its CURVE public key (Z85)
};

class inbox {
 public:
  // A PULL socket, CURVE server with `keys` under ZAP domain `zap_domain`
  // (the context's zap_handler decides who may send), bound to `bind`
  // (e.g. "tcp://127.0.0.1:*"). unavailable naming the endpoint when the bind fails.
  static result<std::unique_ptr<inbox>> bind(zmq::context_t& ctx, const wire::curve_keypair& keys,
                                             const std::string& zap_domain, const std::string& bind);
  ~inbox();
  inbox(const inbox&) = delete;
  inbox& operator=(const inbox&) = delete;

  const std::string& endpoint() const;  // resolved, with the real port
  const std::string& public_key() const;

 private:
  friend class group;  // a group reads the inbox; nothing else does
  struct impl;
  explicit inbox(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

struct group_options {
  std::uint32_t rank = 0;
  std::uint32_t world = 1;
  std::vector<member> members;   // by rank; members.size() == world
  std::uint64_t generation = 0;  // the formation; messages of another generation are dropped
  // No message from the previous rank for this long: deadline_exceeded naming it.
  std::chrono::milliseconds timeout{60'000};
  // Checked at least every 100 ms while waiting: true ends the call with unavailable ("stopped").
  const std::atomic<bool>* stop = nullptr;
};

class group {
 public:
  // Connects to the next rank's inbox. invalid_argument for a rank outside the
  // world, members.size() != world, or a bad key (any member's, or
  // members[rank].public_key not being this inbox's). world == 1 needs no sockets.
  // REQUIRES: `in` outlives the group; one group at a time reads an inbox.
  static result<std::unique_ptr<group>> join(zmq::context_t& ctx, const wire::curve_keypair& mine, inbox& in,
                                             group_options o);
  ~group();
  group(const group&) = delete;
  group& operator=(const group&) = delete;

  // Sums `data` element-wise over every member, in place; every member ends
  // with the same bits. Every member must make the same calls in the same
  // order with the same sizes: each message carries (generation, call number,
  // size) and a mismatch is a conflict error naming both sides. On an error
  // `data` is unspecified and the group is unusable (form a new one).
  // Errors: deadline_exceeded (no frame from the previous rank, or the next
  // rank taking none, for `timeout`), unavailable (stopped), conflict (a
  // member disagrees, or frames of a NEWER generation arrive: the gang
  // re-formed; they are kept for that generation's group), corruption (a
  // malformed frame). Frames of an older generation are dropped and counted.
  // The member that reads a bad frame reports it and stops; its peers may
  // then hear nothing more and end with deadline_exceeded.
  status all_reduce_sum(std::span<float> data);

  std::uint32_t rank() const;
  std::uint32_t world() const;
  // Frame bytes (64-byte headers and payload, before CURVE) handed to the socket.
  std::uint64_t bytes_sent() const;
  // Frames of an older generation read from the inbox and dropped.
  std::uint64_t stale_frames_dropped() const;

 private:
  struct impl;
  explicit group(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace loom::collective
