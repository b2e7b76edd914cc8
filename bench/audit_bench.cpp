// audit_bench: the audit chain's two hot paths (issue 7), on SQLite.
//   append: events chained and encrypted through auditchain::chain_writer —
//           seal the payload (AES-256-GCM, day key), link (SHA-256), INSERT —
//           in transactions of `batch` events, as the audit service's receiver
//           commits what arrived together (services/audit/receiver.cpp drains
//           up to 2,048 events per commit; one WAL fsync per batch,
//           synchronous=FULL). Every 1,000th event is anchored by a signed
//           checkpoint (Ed25519) in the same transaction, appended to the
//           anchor file with an fsync after the commit (and the tail after 60 s). Events carry random
//           128-bit request ids (as libs/wire makes them) and a few active job ids.
//   verify: auditchain::verify_store over the whole log from seq 1 with the
//           anchor keys and the anchor file, no data key; best of 3 runs.
//   reference (printed, not a figure): a third as many events appended with
//           v1's index on request_id, to show what that index costs.
// Last lines, for scripts (before them: the same per second of this
// process's CPU time, which a shared, loaded machine hides):
//   case=append events_per_s=<..>
//   case=verify records_per_s=<..>
// Usage: audit_bench [events (default 300000)] [batch (default 2048)]
// Takes about 30 s by default on a quiet 2-core machine (2 min at load 12).
#include "bench/bench_util.hpp"
#include "libs/auditchain/anchor_file.hpp"
#include "libs/auditchain/checkpoint.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/auditchain/writer.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

using loom::bench::loadavg;

namespace {

namespace ac = loom::auditchain;
namespace store = loom::store;
using clk = std::chrono::steady_clock;

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

[[noreturn]] void fail(const std::string& what, const loom::error& e) {
  std::fprintf(stderr, "audit_bench: %s: %s\n", what.c_str(), e.to_string().c_str());
  std::exit(1);
}

template <class R>
auto must(R r, const std::string& what) {
  if (!r.ok()) fail(what, r.err());
  return std::move(r.value());
}

std::string text(std::mt19937_64& rng, std::size_t n, const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-") {
  const std::size_t k = std::char_traits<char>::length(alphabet);
  std::string s(n, ' ');
  for (auto& c : s) c = alphabet[rng() % k];
  return s;
}

// A pool of events shaped like the services' (generating them is not what
// is measured); request ids and sequence numbers are filled per event.
struct event {
  ac::chain_row meta;
  std::string payload;
};
std::vector<event> make_pool(std::size_t n) {
  std::mt19937_64 rng(7);
  const char* services[] = {"scheduler", "ingest", "trainer", "aggregator"};
  const char* actions[] = {"job.submit", "job.cancel", "token.issue", "stage.switch", "ckpt.rollback", "config.set"};
  std::vector<event> pool(n);
  for (auto& e : pool) {
    auto& r = e.meta;
    r.service = services[rng() % 4];
    r.source = r.service + "@edge-" + std::to_string(rng() % 4);
    r.peer_key = text(rng, 40);
    r.principal = "user-" + text(rng, 6);
    r.role = rng() % 2 ? "operator" : "viewer";
    r.zone = "site-" + std::to_string(rng() % 8);
    r.action = actions[rng() % 6];
    // A few jobs are active at once; token issues and the like have none.
    r.job_id = rng() % 3 == 0 ? std::string() : "job-" + std::to_string(rng() % 20);
    r.decision = static_cast<std::int32_t>(1 + rng() % 3);
    r.reason = r.decision == 1 ? "" : "role " + r.role + " may not " + r.action;
    e.payload = text(rng, 64 + rng() % 192);  // the request's serialized detail
  }
  return pool;
}

struct log_files {
  std::string db, keys, anchors;
};

struct rates {
  double wall = 0;  // per second of wall clock: the figure
  double cpu = 0;   // per second of this process's CPU time: what a quiet machine would approach
};

// Appends `events` events into a fresh log under `dir`.
rates append_case(const std::string& dir, std::size_t events, std::size_t batch, bool request_index,
                  const char* label, log_files& out) {
  out = {dir + "/loom.db", dir + "/keys", dir + "/audit-anchors.log"};
  std::filesystem::create_directories(dir);
  auto db = must(store::database::open(out.db), "open " + out.db);
  // The proposed v2 schema; the reference adds v1's index on request_id.
  const std::string extra = request_index ? "CREATE INDEX audit_events_by_request ON audit_events (request_id);" : "";
  const store::migration m{.owner = "audit_bench", .version = 1, .description = "audit chain tables",
                           .sql = ac::schema_sql(store::backend::sqlite) + extra, .sql_sqlite = {},
                           .sql_postgres = {}, .append_only_tables = {"audit_events", "audit_checkpoints"}};
  if (auto s = store::migrate(*db, std::span<const store::migration>(&m, 1)); !s) fail("migrate", s.err());
  auto now = [] { return std::chrono::system_clock::now(); };
  auto keys = must(ac::keyring::open(out.keys, {}, now()), "keyring");
  auto signer = must(ac::anchor_signer::load_or_generate(out.keys), "anchor key");
  auto file = must(ac::anchor_file::open(out.anchors), "anchor file");
  auto writer = must(ac::chain_writer::open(*db, ac::writer_parts{keys.get(), &signer, file.get(), {}, {}}, now()),
                     "writer");

  const auto pool = make_pool(4096);
  std::vector<std::uint64_t> source_seq(64, 0);
  std::mt19937_64 id_rng(11);
  std::size_t written = 0;
  const auto t0 = clk::now();
  const double cpu0 = cpu_seconds();
  while (written < events) {
    const std::size_t n = std::min(batch, events - written);
    auto done = db->with_transaction([&](store::transaction& tx) -> loom::status {
      for (std::size_t i = 0; i < n; ++i) {
        const event& e = pool[(written + i) % pool.size()];
        ac::chain_row r = e.meta;
        const auto t = now();
        r.unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        r.source_seq = ++source_seq[std::hash<std::string>{}(r.source) % source_seq.size()];
        r.request_id = text(id_rng, 32, "0123456789abcdef");  // random 128 bits, as wire::new_request_id()
        if (auto a = writer->append(tx, std::move(r), e.payload, t); !a) return a.err();
      }
      auto c = writer->checkpoint_if_due(tx, now());  // the 60 s rule; every 1,000th row signs in append()
      if (!c) return c.err();
      return {};
    });
    if (!done) fail("append batch", done.err());
    if (auto s = writer->committed(); !s) fail("anchor file", s.err());
    written += n;
  }
  const double secs = std::chrono::duration<double>(clk::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  const std::size_t checkpoints = must(ac::read_anchor_file(out.anchors), "read anchors").checkpoints.size();
  std::error_code ec;
  std::printf("%s: %zu events in %.2f s (cpu %.2f s), %zu commits, %zu checkpoints, db %.1f MiB, load %s\n", label,
              events, secs, cpu, (events + batch - 1) / batch, checkpoints,
              static_cast<double>(std::filesystem::file_size(out.db, ec) +
                                  std::filesystem::file_size(out.db + "-wal", ec)) /
                  (1 << 20),
              loadavg().c_str());
  return rates{static_cast<double>(events) / secs, static_cast<double>(events) / cpu};
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 300000;
  const std::size_t batch = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2048;
  if (events == 0 || batch == 0) {
    std::fprintf(stderr, "usage: audit_bench [events] [batch]\n");
    return 2;
  }
  std::printf("audit_bench: %zu events, batches of %zu, load %s\n", events, batch, loadavg().c_str());
  loom::files::temp_dir dir("audit-bench");

  log_files ref;
  const std::size_t ref_events = std::max<std::size_t>(events / 3, 1);  // informative only: keep the run short
  const rates ref_rate =
      append_case(dir.path() + "/ref", ref_events, batch, true, "reference append, v1 request_id index", ref);
  std::filesystem::remove_all(dir.path() + "/ref");
  log_files main_log;
  const rates append_rate = append_case(dir.path() + "/main", events, batch, false, "append", main_log);

  auto db = must(store::database::open(main_log.db), "open " + main_log.db);
  ac::verify_options o;
  o.keys_dir = main_log.keys;
  o.anchor_file = main_log.anchors;
  double best = 1e30, best_cpu = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto v0 = clk::now();
    const double cpu0 = cpu_seconds();
    auto rep = must(ac::verify_store(*db, o), "verify");
    const double s = std::chrono::duration<double>(clk::now() - v0).count();
    const double cpu = cpu_seconds() - cpu0;
    if (!rep.ok() || rep.rows != events) {
      std::fprintf(stderr, "audit_bench: the chain does not verify: %s\n", rep.summary().c_str());
      return 1;
    }
    std::printf("verify run %d: %.3f s (cpu %.3f s), %s\n", run + 1, s, cpu, rep.summary().c_str());
    best = std::min(best, s);
    best_cpu = std::min(best_cpu, cpu);
  }
  std::printf("machine: %u hardware threads, load %s\n", std::max(1u, std::thread::hardware_concurrency()),
              loadavg().c_str());
  std::printf("ref=append_with_request_index events_per_s=%.0f events_per_cpu_s=%.0f\n", ref_rate.wall, ref_rate.cpu);
  std::printf("info=cpu append events_per_cpu_s=%.0f verify records_per_cpu_s=%.0f\n", append_rate.cpu,
              static_cast<double>(events) / best_cpu);
  std::printf("case=append events_per_s=%.0f\n", append_rate.wall);
  std::printf("case=verify records_per_s=%.0f\n", static_cast<double>(events) / best);
  return 0;
}
