// Merges repeated identical denials into one counted audit record per window,
// for the gateway: a client retrying with a stale or wrong token (a launcher
// polling health with a revoked admin token) would otherwise write one audit
// row per attempt. Denials are identical when principal, action, reason,
// peer (the CURVE source) and tenant match. The first of a window is recorded at once;
// the repeats are only counted, and when the window closes one summary record
// carries their count. No fact is dropped: every denial is either a record
// of its own or counted in a summary (also at stop: flush()). Only a crash
// (kill -9) loses counts: those of the windows still open, whose first
// denial is durable before any repeat of it is answered.
// Pure logic, time passed in; not thread-safe (the gateway's loop owns it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace loom::runtime {

struct denial {
  std::string principal, role, action, reason, peer, request_id;
  std::string tenant{};  // the record's tenant (auth::record_tenant): "" = admins only
};

// What the summary record of a closed window says: `repeats` denials like
// `last` (not counting the first, which has its own record) between
// `first_request_id` and `last.request_id`.
struct denial_summary {
  denial last;
  std::uint64_t repeats = 0;
  std::string first_request_id;  // of the first repeat
  std::chrono::steady_clock::duration window{};
  std::uint64_t first_ordinal = 0;  // the record of the window's first denial
};

class denial_merge {
 public:
  using clock = std::chrono::steady_clock;
  // REQUIRES: window > 0. At most `max_windows` keys are tracked at once; a
  // denial beyond that is recorded on its own (never merged, never dropped).
  explicit denial_merge(std::chrono::milliseconds window, std::size_t max_windows = 10000);

  // True: record `d` now (the first of its window, or no room to track it);
  // call opened() with the record's ordinal. False: counted into the open
  // window of an identical denial; its record is `ordinal_of_first`.
  bool admit(const denial& d, clock::time_point now, std::uint64_t* ordinal_of_first = nullptr);
  // The ordinal of the record just made for an admitted denial.
  void opened(const denial& d, std::uint64_t ordinal);
  // Closes every window that ended by `now`: the summaries of those that had
  // repeats, oldest window first.
  std::vector<denial_summary> due(clock::time_point now);
  // Closes every window now (the gateway stops): summaries of those with repeats.
  std::vector<denial_summary> flush();
  std::size_t open_windows() const { return windows_.size(); }

 private:
  using key = std::tuple<std::string, std::string, std::string, std::string, std::string>;  // principal, action, reason, peer, tenant
  struct window {
    clock::time_point opened;
    std::uint64_t first_ordinal = 0;
    std::uint64_t repeats = 0;
    std::string first_repeat_id;
    denial last;
  };
  static key key_of(const denial& d) { return {d.principal, d.action, d.reason, d.peer, d.tenant}; }
  denial_summary summary_of(const window& w) const;

  std::chrono::milliseconds window_;
  std::size_t max_windows_;
  std::map<key, window> windows_;
};

}  // namespace loom::runtime
