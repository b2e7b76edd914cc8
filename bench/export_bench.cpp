// export_bench: how fast libs/export writes and reads a GPT-2, and what q8_0
// costs in accuracy. A d6 GPT-2 (L 6, C 384, maxT 1024, GPT-2's vocabulary:
// 30M parameters, N(0, 0.02) from a fixed seed) is exported to a temp dir
// under $TMPDIR (each write fsynced, as in production) as a Hugging Face
// directory and as GGUF f32, f16 and q8_0, then each GGUF is read back and
// dequantised. Wall time, best of 2 (the box is shared; the disk counts).
// One line per case:
//   case=<hf|gguf_f32|gguf_f16|gguf_q8_0|read_q8_0> params=<..> seconds=<..>
//   mparams_per_s=<..> bytes=<..> [bits_per_param=<..> max_err_over_scale=<..> rms_err=<..>]
//   load=<1m 5m 15m>
#include "bench/bench_util.hpp"
#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/hf_dir.hpp"
#include "libs/export/quant.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/tokenizer/bpe.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

using namespace loom;
using namespace loom::exporter;

namespace {

using clk = std::chrono::steady_clock;
constexpr int passes = 2;
constexpr model::gpt2_config cfg{6, 6, 384, 1024, 50257, 50304};

double best_of(const std::function<void()>& f) {
  double best = 1e30;
  for (int i = 0; i < passes; ++i) {
    const auto t0 = clk::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
  }
  return best;
}

std::uintmax_t size_of(const std::filesystem::path& p) {
  if (!std::filesystem::is_directory(p)) return std::filesystem::file_size(p);
  std::uintmax_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(p)) n += e.file_size();
  return n;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "export_bench: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main() {
  auto bpe = tokenizer::bpe::load_gpt2();
  if (!bpe) die(bpe.err().to_string());
  auto tok = tokenizer::spec_from_ranks(*bpe);
  if (!tok) die(tok.err().to_string());
  const auto layout = model::make_param_layout(cfg);
  std::vector<float> params(layout.total);
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 0.02f);
  for (auto& x : params) x = n(rng);
  const double exported = double(layout.total) - double(cfg.padded_vocab - cfg.vocab) * cfg.channels;
  files::temp_dir tmp("loom-export-bench");
  const std::filesystem::path dir = tmp.path();
  const std::string load = bench::loadavg();

  const auto report = [&](const char* name, double s, std::uintmax_t bytes, const std::string& extra) {
    std::printf("case=%s params=%.0f seconds=%.3f mparams_per_s=%.1f bytes=%ju%s load=%s\n", name, exported, s,
                exported / s / 1e6, bytes, extra.c_str(), load.c_str());
    std::fflush(stdout);
  };
  int run = 0;
  const auto fresh = [&](const std::string& stem) { return dir / (stem + std::to_string(run++)); };

  std::filesystem::path last;
  double s = best_of([&] {
    last = fresh("hf");
    if (auto st = write_hf_dir(cfg, params, *tok, last); !st) die(st.err().to_string());
  });
  report("hf", s, size_of(last), "");
  for (auto type : {gguf_type::f32, gguf_type::f16, gguf_type::q8_0}) {
    s = best_of([&] {
      last = fresh("m.gguf");
      if (auto st = write_gguf(cfg, params, *tok, type, last); !st) die(st.err().to_string());
    });
    const std::string name = "gguf_" + std::string(to_string(type));
    std::uintmax_t data = 0;
    auto f = read_gguf(last);
    if (!f) die(f.err().to_string());
    for (const auto& t : f->tensors()) data += t.bytes;
    char extra[64];
    std::snprintf(extra, sizeof extra, " bits_per_param=%.2f", 8.0 * double(data) / exported);
    report(name.c_str(), s, size_of(last), extra);
  }
  // Read back the q8_0 file, dequantise everything, measure the error.
  double max_ratio = 0, sq = 0;
  s = best_of([&] {
    auto f = read_gguf(last);
    if (!f) die(f.err().to_string());
    max_ratio = sq = 0;
    const auto plan = gguf_gpt2_tensors(cfg, gguf_type::q8_0);
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const auto& t = f->tensors()[i];
      const auto got = dequantize(*f, t);
      const auto want = tensor_slice(cfg, params, plan[i].id, plan[i].layer);
      const auto raw = f->data(t);
      for (std::size_t k = 0; k < got.size(); ++k) {
        const double e = double(got[k]) - want[k];
        sq += e * e;
        if (t.type == gguf_type::q8_0) {
          std::uint16_t d16;
          std::memcpy(&d16, raw.data() + k / 32 * q8_0_block_bytes, 2);
          max_ratio = std::max(max_ratio, std::fabs(e) / f16_to_f32(d16));
        }
      }
    }
  });
  char extra[96];
  std::snprintf(extra, sizeof extra, " max_err_over_scale=%.4f rms_err=%.3g", max_ratio, std::sqrt(sq / exported));
  report("read_q8_0", s, size_of(last), extra);
  return 0;
}
