// Peak RSS of bin/loom-ingest-import importing a corpus four times its memory
// budget: 64 MiB budget, 256 MiB of Debian prose in ~60,000 documents of 0.5-4 KB
// and up (many documents, so the dedup index outgrows its share and spills);
// and a folder of incompressible images and long audio over the same budget.
// Measured from outside: the child's ru_maxrss (getrusage(RUSAGE_CHILDREN) after
// waitpid). The bound is
// budget + a fixed allowance for the process itself, which a tiny import
// measures first (code, GPT-2 tables, ICU and libphonenumber data, BPE cache).
// RUN_SERIAL in CTest: a memory and wall-clock check on a 2-core machine.
#include "libs/files/temp_dir.hpp"
#include "libs/media/audio.hpp"
#include "libs/media/audio_testing.hpp"
#include "libs/media/codec.hpp"
#include "services/ingest/importer/testing.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <random>
#include <vector>

namespace {

constexpr std::uint64_t MiB = 1 << 20;
constexpr std::uint64_t budget = 64 * MiB;
constexpr std::uint64_t corpus_bytes = 4 * budget;
// What the process costs before any budgeted memory: measured 27 MiB for a
// tiny import on Debian 12 / g++ 12 RelWithDebInfo (README.md). 40 MiB adds
// room for allocator slack and data pages a tiny import does not touch (ICU
// normalisation tables, more of libphonenumber's metadata).
constexpr std::uint64_t allowance = 40 * MiB;

struct run_result {
  int exit_code = -1;
  std::uint64_t children_max_rss = 0;  // RUSAGE_CHILDREN after this child: max over children so far
  double seconds = 0;
  std::string out;
};

run_result run_tool(const std::vector<std::string>& args, const std::string& out_path) {
  run_result r;
  std::vector<char*> argv;
  std::string tool = LOOM_INGEST_IMPORT_TOOL;
  argv.push_back(tool.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, 1);
    ::execv(tool.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  r.children_max_rss = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = loom::ingest::importer_testing::slurp(out_path);
  return r;
}

// Pixels of uniform noise: what JPEG cannot shrink.
loom::media::image noise_image(std::uint64_t seed, std::uint32_t w, std::uint32_t h) {
  loom::media::image img = loom::media::make_image(w, h);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < img.pixels.size(); i += 8) {
    const std::uint64_t r = rng();
    for (std::size_t k = 0; k < 8 && i + k < img.pixels.size(); ++k) img.pixels[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
  }
  return img;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

TEST_CASE("an import of a corpus four times the memory budget peaks below budget plus the process's own size") {
  loom::files::temp_dir t("loom-ingest-mem");
  const std::string root = t.path() + "/datasets";
  const std::string mem = std::to_string(budget / MiB) + "MiB";

  // 1. The baseline: a tiny import (runs first, so RUSAGE_CHILDREN is its peak).
  loom::ingest::importer_testing::write_file(t.path() + "/tiny/a.txt", loom::ingest::importer_testing::prose(1, 300));
  auto tiny = run_tool({t.path() + "/tiny", "--dataset", "tiny", "--datasets-root", root, "--memory", mem},
                       t.path() + "/tiny.out");
  REQUIRE_MESSAGE(tiny.exit_code == 0, tiny.out);
  const std::uint64_t baseline = tiny.children_max_rss;

  // 2. The corpus and the big import.
  const std::uint64_t text = loom::ingest::importer_testing::write_debian_corpus(t.path() + "/corpus", corpus_bytes, 0x3E3, 512, 4096);
  auto big = run_tool({t.path() + "/corpus", "--dataset", "big", "--datasets-root", root, "--memory", mem,
                       "--nodes", "a,b,c", "--json"},
                      t.path() + "/big.out");
  REQUIRE_MESSAGE(big.exit_code == 0, big.out);
  auto rep = nlohmann::json::parse(big.out, nullptr, false);
  REQUIRE(rep.is_object());
  const std::uint64_t peak = big.children_max_rss;

  MESSAGE("baseline (tiny import) peak RSS " << baseline / MiB << " MiB; stated allowance " << allowance / MiB
                                             << " MiB");
  MESSAGE("corpus " << text / MiB << " MiB of text in " << rep["totals"]["files"] << " files, "
                    << rep["totals"]["documents"] << " documents; kept " << rep["totals"]["kept"] << ", duplicates "
                    << rep["totals"]["duplicates"] << ", rejected " << rep["totals"]["rejected"]);
  MESSAGE("dedup spilled " << rep["dedup"]["runs_spilled"] << " runs, "
                           << rep["dedup"]["bytes_spilled"].get<std::uint64_t>() / MiB << " MiB; "
                           << rep["output"]["shards"] << " shards, " << rep["output"]["tokens"] << " tokens");
  MESSAGE("budget " << budget / MiB << " MiB: peak RSS " << peak / MiB << " MiB (limit " << (budget + allowance) / MiB
                    << " MiB), " << big.seconds << " s wall, " << rep["performance"]["mb_per_s"]
                    << " MB/s; load average " << loadavg());
  CHECK(text >= corpus_bytes);
  CHECK(baseline <= allowance);
  CHECK(rep["dedup"]["runs_spilled"].get<std::uint64_t>() > 0);  // the index did not fit: it spilled
  CHECK(peak <= budget + allowance);
}

TEST_CASE("an import of images and audio over its budget refuses what will not fit by reason and peaks below budget plus the process") {
  namespace it = loom::ingest::importer_testing;
  loom::files::temp_dir t("loom-ingest-media-mem");
  const std::string root = t.path() + "/datasets", in = t.path() + "/media";
  const std::string mem = std::to_string(budget / MiB) + "MiB";
  it::write_file(t.path() + "/tiny/a.txt", it::prose(1, 300));
  auto tiny = run_tool({t.path() + "/tiny", "--dataset", "tiny", "--datasets-root", root, "--memory", mem},
                       t.path() + "/tiny.out");
  REQUIRE_MESSAGE(tiny.exit_code == 0, tiny.out);
  const std::uint64_t baseline = tiny.children_max_rss;

  // Noise does not compress: 240 images of 1000 x 750 (0.75 Mpx, under the
  // 64 MiB budget's 1 Mpx) at JPEG q95, ~3 x the budget in all; a 2000 x 1500
  // scene (over it in pixels); speech-like sound: 20 s of 44.1 kHz stereo
  // (kept), 50 s of 16 kHz mono (over the budget's ~42 s) and 60 s of 44.1 kHz
  // stereo (10 MB: over the budget's 4 MiB for one file, not read).
  std::uint64_t bytes = 0;
  for (int i = 0; i < 240; ++i) {
    auto img = noise_image(1000 + std::uint64_t(i), 1000, 750);
    auto jpg = loom::media::encode_jpeg(img, 95);
    REQUIRE(jpg.ok());
    bytes += jpg->size();
    it::write_file(in + "/img" + std::to_string(1000 + i) + ".jpg", *jpg);
  }
  auto big = loom::media::encode_jpeg(loom::media::make_image(2000, 1500, 40, 90, 160), 90);
  REQUIRE(big.ok());
  it::write_file(in + "/big.jpg", *big);
  it::write_file(in + "/talk20.wav",
                 loom::media::encode_wav16(loom::media::testing::speechlike(1, 20, 44100, 2), 44100, 2));
  it::write_file(in + "/talk50.wav",
                 loom::media::encode_wav16(loom::media::testing::speechlike(2, 50, 16000, 1), 16000, 1));
  it::write_file(in + "/talk60.wav",
                 loom::media::encode_wav16(loom::media::testing::speechlike(3, 60, 44100, 2), 44100, 2));
  auto run = run_tool({in, "--dataset", "media", "--datasets-root", root, "--memory", mem, "--json"},
                      t.path() + "/media.out");
  REQUIRE_MESSAGE(run.exit_code == 0, run.out);
  auto rep = nlohmann::json::parse(run.out, nullptr, false);
  REQUIRE(rep.is_object());
  const auto& m = rep["media"];
  MESSAGE("images " << bytes / MiB << " MiB in 240 files; kept " << m["images"] << " images + " << m["audio"]
                    << " audio in " << m["tars"] << " tars; refused " << m["rejected_by_reason"].dump()
                    << "; peak RSS " << run.children_max_rss / MiB << " MiB (limit " << (budget + allowance) / MiB
                    << " MiB, baseline " << baseline / MiB << " MiB), " << run.seconds << " s; load " << loadavg());
  CHECK(bytes >= 3 * budget);
  CHECK(m["images"] == 240);
  CHECK(m["audio"] == 1);
  CHECK(m["rejected_by_reason"]["too_large"] == 1);
  CHECK(m["rejected_by_reason"]["too_long"] == 1);
  CHECK(m["rejected_by_reason"]["media_too_large"] == 1);
  CHECK(m["tars"].get<int>() >= 2);
  CHECK(run.children_max_rss <= budget + allowance);
}
