// What both chaos harnesses share (chaos.test.cpp: one host; chaos_lan.test.cpp:
// a cloud and two sites on separate hosts): the run's settings from the
// environment, a process's open files and memory, the log of the faults, and
// the scans for temporary files and published snapshots. Tests only.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace loom::test::chaos {
using steady = std::chrono::steady_clock;

inline long env_number(const char* name, long fallback, long lo, long hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  REQUIRE_MESSAGE((*end == 0 && n >= lo && n <= hi), name << "=" << v << " is not a whole number in " << lo << ".." << hi);
  return n;
}

struct proc_use {
  long fds = 0;
  long rss_kib = 0;
};

inline proc_use use_of(long pid) {
  proc_use u;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++u.fds;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) u.rss_kib = std::strtol(line.c_str() + 6, nullptr, 10);
  return u;
}

// What the fault thread did, for the report.
struct fault_log {
  std::mutex mu;
  std::map<std::string, int> counts;  // kind -> how many
  std::vector<std::string> lines;
  void add(const std::string& kind, const std::string& what, steady::time_point t0) {
    std::lock_guard lock(mu);
    ++counts[kind];
    lines.push_back(std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count()) +
                    " ms: " + what);
  }
};

// /proc/PID/stat: the state letter (0: no such process) and the parent's pid.
inline std::pair<char, long> stat_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 > text.size()) return {0, 0};
  return {text[close + 2], std::strtol(text.c_str() + close + 4, nullptr, 10)};
}

inline std::vector<long> children_of(long parent) {
  std::vector<long> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    char* end = nullptr;
    const long pid = std::strtol(it->path().filename().c_str(), &end, 10);
    if (*end == 0 && pid > 0 && stat_of(pid).second == parent) out.push_back(pid);
  }
  return out;
}

inline bool gone(long pid) {
  const char st = stat_of(pid).first;
  return st == 0 || st == 'Z' || st == 'X';
}

// Every file under `root` that is a temporary: an atomic write's
// "<name>.tmp.<pid>.<n>", a snapshot's or export's ".tmp-*", a transfer's
// "*.part" — what a process leaves when it dies mid-write.
inline std::vector<std::string> temp_files(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp.") != std::string::npos || name.starts_with(".tmp-") || name.ends_with(".part") ||
        name.find(".part.state") != std::string::npos)
      out.push_back(it->path().string());
  }
  return out;
}

// Every published snapshot directory (step-N under a checkpoints dir) under `root`.
inline std::vector<std::pair<std::string, std::uint64_t>> snapshots_under(const std::string& root) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_directory(ec) || !name.starts_with("step-")) continue;
    char* end = nullptr;
    const auto step = std::strtoull(name.c_str() + 5, &end, 10);
    if (*end == 0 && std::filesystem::exists(it->path() / "MANIFEST.json")) out.emplace_back(it->path().string(), step);
    it.disable_recursion_pending();
  }
  return out;
}

// The fault thread's life: started on a loop, paced by pauses that end early
// once told to stop, joined. Both harnesses' fault threads are one.
struct fault_pacer {
  std::atomic<bool> stop{false};
  std::thread th;
  template <class Loop>
  void run(Loop loop) {
    th = std::thread(std::move(loop));
  }
  void join() {
    stop = true;
    if (th.joinable()) th.join();
  }
  // Sleeps `d` unless told to stop: the pacing of the faults, not a wait for a condition.
  void pause(std::chrono::milliseconds d) {
    for (auto end = steady::now() + d; !stop && steady::now() < end;) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
};

// The last `lines` lines of `text` (a log), for a failure's report.
inline std::string last_lines(const std::string& text, int lines) {
  std::size_t at = text.size();
  for (int n = 0; n < lines && at > 0; ++n) {
    const std::size_t nl = text.rfind('\n', at - 1);
    at = nl == std::string::npos ? 0 : nl;
  }
  return text.substr(at);
}

// What is wrong with a process's use now against its baseline ("" when
// nothing): at most 32 more open files, at most twice the memory plus 256 MiB.
inline std::string over_baseline(const std::string& name, const proc_use& now, const proc_use& was) {
  if (now.fds > was.fds + 32)
    return name + " holds " + std::to_string(now.fds) + " open files, " + std::to_string(was.fds) + " at the start";
  if (now.rss_kib > 2 * was.rss_kib + 256 * 1024)
    return name + " uses " + std::to_string(now.rss_kib / 1024) + " MiB, " + std::to_string(was.rss_kib / 1024) +
           " MiB at the start";
  return "";
}

// The job list's ids against the jobs submits were answered with: what is
// listed twice, lost (answered, not listed) or run twice (listed, never answered).
inline std::vector<std::string> job_list_violations(const std::vector<std::string>& listed_ids,
                                                    const std::set<std::string>& answered) {
  std::vector<std::string> out;
  std::set<std::string> listed;
  for (const auto& id : listed_ids)
    if (!listed.insert(id).second) out.push_back("job " + id + " is listed twice");
  for (const auto& id : answered)
    if (!listed.count(id)) out.push_back("job " + id + " was answered to a submit but is not listed: lost");
  for (const auto& id : listed)
    if (!answered.count(id)) out.push_back("job " + id + " is listed but no submit was answered with it: run twice");
  return out;
}

}  // namespace loom::test::chaos
