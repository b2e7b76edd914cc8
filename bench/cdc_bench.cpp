// cdc_bench: single-threaded FastCDC throughput (loom::cdc, 16/64/256 KiB) over
// 1 GiB of pseudo-random bytes in memory (xorshift64*, fixed seed), chunking
// only and chunking + SHA-256 per chunk (what a manifest build costs), and
// SHA-256 alone for reference (the bound on the second figure). GB =
// 10^9 bytes; figures divide by this thread's CPU time, best of 3 passes (the
// box is shared), i.e. per core. Then whole pulls (sync_client against a
// sync_server in this process, plaintext on tcp loopback; best and median of
// 9, wall time and the process's CPU time, which all its threads add to and
// which a busy box disturbs less): a dataset of 4096 x 8 KiB files + one
// 64 MiB file pulled again unchanged, and after a 1-byte edit of the big
// file. These carry the control protocol's codec (summary manifest, chunk
// list). Then that codec alone, in this thread's CPU time per round trip
// (encode, decode, the checks on arrival; best of 30): the dataset's summary
// and the big file's chunk list as protobuf (the wire, protocol.hpp) and as
// JSON (the protocol's codec until loom.v1.Sync*, still the on-disk form).
// Last lines, for scripts:
//   case=sync_unchanged best_ms=<..> median_ms=<..> best_cpu_ms=<..> median_cpu_ms=<..> wire_bytes=<..>
//   case=sync_edit1 (the same)
//   case=sync_share (the same, plus share_bytes=<..>): a fresh pull of a node's
//     share only (sync_client_options::want: every other small file, not the
//     big one), what a trainer with data.local fetches; wire bytes follow the
//     share, not the dataset
//   case=codec_summary files=<..> json_us=<..> proto_us=<..> json_bytes=<..> proto_bytes=<..>
//   case=codec_chunk_list chunks=<..> (the same)
//   case=fastcdc gb_per_s=<..> sha256_gb_per_s=<..>
// Usage: cdc_bench [MiB]   (default 1024; chunking only)
#include "bench/bench_util.hpp"
#include "libs/cdc/fastcdc.hpp"
#include "libs/cdc/manifest.hpp"
#include "libs/cdc/protocol.hpp"
#include "libs/cdc/sync_client.hpp"
#include "libs/cdc/sync_server.hpp"
#include "libs/files/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <time.h>
#include <vector>

using loom::bench::thread_cpu_s;

namespace {

constexpr int passes = 3;

template <class F>
double best_gb_per_s(std::size_t bytes, F&& f) {
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    double t0 = thread_cpu_s();
    f();
    double dt = thread_cpu_s() - t0;
    best = std::max(best, static_cast<double>(bytes) / dt / 1e9);
  }
  return best;
}

// ---- sync: the dataset and the timing -------------------------------------

// Many small files make the summary manifest large (4097 entries); the big
// file's chunk list (~1024 chunks) is what a 1-byte edit asks for.
constexpr int sync_small_files = 4096;
constexpr std::size_t sync_small_bytes = 8u << 10;
constexpr std::size_t sync_big_bytes = 64u << 20;
constexpr int sync_passes = 9;

// Written an hour in the past: a file modified within 2 s of a manifest build
// is never stat-cached (manifest.cpp's racy window), and the figures are of
// datasets at rest.
void put(const std::string& path, const std::string& data) {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(1));
}

double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct sync_figure {
  std::vector<double> ms, cpu_ms;
  std::uint64_t wire_bytes = 0;  // of the last pull
};

void print(const char* name, sync_figure f) {
  std::sort(f.ms.begin(), f.ms.end());
  std::sort(f.cpu_ms.begin(), f.cpu_ms.end());
  std::printf("case=%s best_ms=%.2f median_ms=%.2f best_cpu_ms=%.2f median_cpu_ms=%.2f wire_bytes=%llu\n", name,
              f.ms.front(), f.ms[f.ms.size() / 2], f.cpu_ms.front(), f.cpu_ms[f.cpu_ms.size() / 2],
              static_cast<unsigned long long>(f.wire_bytes));
}

// Runs `before` (not timed) then one timed pull, `sync_passes` times.
template <class F>
sync_figure time_pulls(loom::cdc::sync_client& c, const std::string& ep, const std::string& into, F&& before) {
  sync_figure f;
  for (int i = 0; i < sync_passes; ++i) {
    before(i);
    const double cpu0 = process_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.pull(ep, "bench", into);
    f.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    f.cpu_ms.push_back((process_cpu_s() - cpu0) * 1e3);
    if (!r.ok()) {
      std::fprintf(stderr, "cdc_bench: pull failed: %s\n", r.err().to_string().c_str());
      std::exit(1);
    }
    f.wire_bytes = r->wire_bytes_in + r->wire_bytes_out;
  }
  return f;
}

// ---- the codec alone ---------------------------------------------------------

constexpr int codec_reps = 30;

template <class F>
double best_us(F&& f) {
  double best = 1e30;
  for (int i = 0; i < codec_reps; ++i) {
    const double t0 = thread_cpu_s();
    f();
    best = std::min(best, (thread_cpu_s() - t0) * 1e6);
  }
  return best;
}

void codec_cases(const std::string& dir) {
  namespace cdc = loom::cdc;
  auto m = cdc::build_manifest(dir);
  if (!m.ok()) {
    std::fprintf(stderr, "cdc_bench: %s\n", m.err().to_string().c_str());
    std::exit(1);
  }
  bool ok = true;
  const std::size_t json_bytes = cdc::to_json(*m, cdc::json_form::summary).size();
  const std::size_t proto_bytes = cdc::encode_summary(*m).size();
  double json_us = best_us([&] { ok &= cdc::parse_manifest(cdc::to_json(*m, cdc::json_form::summary), "b").ok(); });
  double proto_us = best_us([&] { ok &= cdc::decode_manifest(cdc::encode_summary(*m), "b").ok(); });
  std::printf("case=codec_summary files=%zu json_us=%.1f proto_us=%.1f json_bytes=%zu proto_bytes=%zu\n",
              m->files.size(), json_us, proto_us, json_bytes, proto_bytes);

  // JSON: a one-file manifest, i.e. the entry codec the protocol used per file.
  const cdc::file_entry* big = m->find("big.bin");
  cdc::manifest one;
  one.chunking = m->chunking;
  one.files = {*big};
  one.root = cdc::dataset_root(one.files);
  const std::vector<std::string> paths{big->path};
  json_us = best_us([&] { ok &= cdc::parse_manifest(cdc::to_json(one), "b").ok(); });
  proto_us = best_us([&] { ok &= cdc::decode_chunks(cdc::encode_chunks({big}), paths, "b").ok(); });
  std::printf("case=codec_chunk_list chunks=%zu json_us=%.1f proto_us=%.1f json_bytes=%zu proto_bytes=%zu\n",
              big->chunks.size(), json_us, proto_us, cdc::to_json(one).size(), cdc::encode_chunks({big}).size());
  if (!ok) {
    std::fprintf(stderr, "cdc_bench: a codec round trip failed\n");
    std::exit(1);
  }
}

// ---- whole pulls ----------------------------------------------------------------

void sync_cases() {
  loom::files::temp_dir served("loom-cdc-bench-src"), received("loom-cdc-bench-dst");
  const std::string src = served.path() + "/bench";
  for (int i = 0; i < sync_small_files; ++i)
    put(src + "/small/" + std::to_string(i / 256) + "/f-" + std::to_string(i),
        loom::bench::pseudo_random(sync_small_bytes, 1000 + static_cast<std::uint64_t>(i)));
  put(src + "/big.bin", loom::bench::pseudo_random(sync_big_bytes, 7));

  zmq::context_t ctx(1);
  loom::cdc::sync_server_options so;
  so.root = served.path();
  auto server = loom::cdc::sync_server::start(ctx, loom::wire::bench_plaintext, so);
  if (!server.ok()) {
    std::fprintf(stderr, "cdc_bench: %s\n", server.err().to_string().c_str());
    std::exit(1);
  }
  const std::string ep = (*server)->endpoint();
  {
    loom::cdc::sync_client client(ctx, loom::wire::bench_plaintext);
    (void)time_pulls(client, ep, received.path(), [](int) {});  // first full pull (and warm caches)
    print("sync_unchanged", time_pulls(client, ep, received.path(), [](int) {}));
    print("sync_edit1", time_pulls(client, ep, received.path(), [&](int i) {
      const auto at =
          static_cast<std::streamoff>(sync_big_bytes / (sync_passes + 1) * static_cast<std::size_t>(i + 1));
      std::fstream f(src + "/big.bin", std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(at);
      const char c = static_cast<char>(f.get() ^ 0x01);
      f.seekp(at);
      f.put(c);
    }));
  }
  {
    loom::cdc::sync_client_options share;
    share.want = [](const std::string& rel) {  // small/K/f-N with N even
      return rel.starts_with("small/") && (rel.back() - '0') % 2 == 0;
    };
    loom::cdc::sync_client client(ctx, loom::wire::bench_plaintext, share);
    const std::string into = received.path() + "-share";
    auto f = time_pulls(client, ep, into, [&](int) { std::filesystem::remove_all(into); });
    std::sort(f.ms.begin(), f.ms.end());
    std::sort(f.cpu_ms.begin(), f.cpu_ms.end());
    std::printf("case=sync_share best_ms=%.2f median_ms=%.2f best_cpu_ms=%.2f median_cpu_ms=%.2f wire_bytes=%llu "
                "share_bytes=%zu\n",
                f.ms.front(), f.ms[f.ms.size() / 2], f.cpu_ms.front(), f.cpu_ms[f.cpu_ms.size() / 2],
                static_cast<unsigned long long>(f.wire_bytes), std::size_t(sync_small_files / 2) * sync_small_bytes);
    std::filesystem::remove_all(into);
  }
  server->reset();
  codec_cases(src);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const std::size_t bytes = mib << 20;
  const std::string data = loom::bench::pseudo_random(bytes, 0xcdcb3);
  const loom::cdc::params p;

  std::size_t chunks = 0;
  double cut = best_gb_per_s(bytes, [&] { chunks = loom::cdc::chunk_lengths(data, p).size(); });
  std::printf("fastcdc     %zu MiB  %zu chunks  mean %.1f KiB  %.2f GB/s\n", mib, chunks,
              static_cast<double>(bytes) / static_cast<double>(chunks) / 1024.0, cut);

  std::uint8_t sink = 0;  // keeps the hashes observable
  double sha_only = best_gb_per_s(bytes, [&] {
    for (std::size_t off = 0; off < bytes; off += 64u << 10)
      sink ^= loom::crypto::sha256(std::string_view(data).substr(off, 64u << 10))[0];
  });
  std::printf("sha256 alone (64 KiB blocks, for reference)  %.2f GB/s\n", sha_only);
  double hashed = best_gb_per_s(bytes, [&] {
    for (const auto& c : loom::cdc::chunk_data(data, p)) sink ^= c.sha256[0];
  });
  std::printf("fastcdc+sha256  %.2f GB/s  (sink %u)\n", hashed, sink);

  sync_cases();

  std::printf("case=fastcdc gb_per_s=%.2f sha256_gb_per_s=%.2f\n", cut, hashed);
  return 0;
}
