// relay: a group member's all-reduce carried to another process over a
// stream socket (a socketpair), for a stage that trains in a child process
// while the group — its sockets, its inbox, its generation — stays the
// parent's (services/trainer/stage_process.hpp).
//
//   child (exchange)                          parent (serve_one)
//   u64 count, count floats  ───────────────▶ sum(floats) over the group
//                            ◀─────────────── u8 1, count floats (the sums)
//                            ◀─────────────── or u8 0, u32 n, n bytes of JSON
//                                             {"code", "message"}: the error
//
// One exchange at a time, in order; the floats in the host's byte order (the
// two ends are one machine). A count past max_floats, a truncated frame or an
// answer that is neither is a broken peer: the exchange fails, naming it.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <span>

namespace loom::collective::relay {

// The most floats one exchange carries: 16 GiB of them, past any model the
// engine trains (a count beyond it is a broken or hostile peer, not a model).
inline constexpr std::uint64_t max_floats = std::uint64_t(1) << 32;

// The child's side: sends `v`, blocks for the answer; `v` holds the sums on
// success. unavailable when the parent is gone (it names that); the parent's
// error (its code and message) when the exchange failed there.
status exchange(int fd, std::span<float> v);

// The parent's side of one exchange, once `fd` is readable: reads the
// request, runs `sum` on it, calls `before_answer` (may be null) and answers.
// An error (the peer gone, a broken frame, a count past max_floats) means
// the relay is done: the caller closes `fd`. `sum`'s own error is answered,
// not returned.
status serve_one(int fd, const std::function<status(std::span<float>)>& sum,
                 const std::function<void()>& before_answer = {});

}  // namespace loom::collective::relay
