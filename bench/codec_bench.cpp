// codec_bench: single-threaded throughput of every loom::codec format over N
// fp32 values of Gaussian data (sigma 1e-3, fixed seed): encode, decode, and
// error feedback's round (e += delta; encode; e -= decode). GB = 10^9 bytes of
// fp32 input (4 per value); figures divide by this thread's CPU time, best of
// 5 passes (the box is shared), i.e. per core. gb_per_s is encode + decode
// together: 4N / (t_encode + t_decode). rel_err is the relative L2 error of
// one round trip of that data (Student-t(3) data in the table above the case
// lines); bytes_per_mparam the payload size for 10^6 values, header included.
// Last lines, for scripts, one per codec:
//   case=<codec> gb_per_s=<..> encode_gb_per_s=<..> decode_gb_per_s=<..> rel_err=<..> bytes_per_mparam=<..>
// Usage: codec_bench [million values]   (default 16)
#include "bench/bench_util.hpp"
#include "libs/codec/codec.hpp"
#include "libs/codec/error_feedback.hpp"
#include "libs/codec/test_data.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using loom::bench::thread_cpu_s;
namespace codec = loom::codec;

namespace {

constexpr int passes = 5;

template <class F>
double best_seconds(F&& f) {
  double best = 1e300;
  for (int p = 0; p < passes; ++p) {
    const double t0 = thread_cpu_s();
    f();
    best = std::min(best, thread_cpu_s() - t0);
  }
  return best;
}

void die(const loom::status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "codec_bench: %s: %s\n", what, s.err().to_string().c_str());
  std::exit(1);
}

struct figures {
  double enc_s = 0, dec_s = 0, ef_s = 0, rel_err = 0, rel_err_t3 = 0;
  std::uint64_t bytes = 0;
};

figures measure(codec::codec_id c, const std::vector<float>& x, const std::vector<float>& t3) {
  figures f;
  std::vector<std::byte> q;
  std::vector<float> y(x.size());
  f.enc_s = best_seconds([&] { die(codec::encode_into(c, x, {}, q), "encode"); });
  f.bytes = q.size();
  f.dec_s = best_seconds([&] { die(codec::decode(q, y), "decode"); });
  f.rel_err = codec::testing::rel_l2(y, x);
  std::vector<float> yt(t3.size());
  die(codec::encode_into(c, t3, {}, q), "encode t3");
  die(codec::decode(q, yt), "decode t3");
  f.rel_err_t3 = codec::testing::rel_l2(yt, t3);
  codec::error_feedback ef(x.size(), c);
  f.ef_s = best_seconds([&] { die(ef.encode_into(x, q), "error feedback"); });
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const double millions = argc > 1 ? std::atof(argv[1]) : 16.0;
  const auto n = static_cast<std::size_t>(millions * 1e6);
  if (n == 0) {
    std::fprintf(stderr, "usage: codec_bench [million values > 0]\n");
    return 2;
  }
  const auto x = codec::testing::gaussian(n, 42, 1e-3);
  const auto t3 = codec::testing::student_t(std::min<std::size_t>(n, 1u << 22), 43, 3, 1e-3);
  const double gb = 4.0 * static_cast<double>(n) / 1e9;
  std::printf("codec_bench: %zu values (%.1f MB fp32), best of %d, thread CPU time; load %s\n", n, gb * 1e3,
              passes, loom::bench::loadavg().c_str());
  std::printf("%-5s %9s %9s %9s %9s %10s %11s %9s\n", "codec", "enc_GB/s", "dec_GB/s", "e+d_GB/s", "ef_GB/s",
              "rel_err", "rel_err_t3", "bits/par");
  std::vector<std::string> lines;
  for (codec::codec_id c : codec::all_codecs) {
    const figures f = measure(c, x, t3);
    const std::uint64_t per_m = codec::encoded_bytes(c, 1'000'000);
    const double both = gb / (f.enc_s + f.dec_s);
    std::printf("%-5s %9.2f %9.2f %9.2f %9.2f %10.5f %11.5f %9.3f\n", std::string(codec::to_string(c)).c_str(),
                gb / f.enc_s, gb / f.dec_s, both, gb / f.ef_s, f.rel_err, f.rel_err_t3,
                8.0 * static_cast<double>(f.bytes) / static_cast<double>(n));
    char line[256];
    std::snprintf(line, sizeof line,
                  "case=%s gb_per_s=%.2f encode_gb_per_s=%.2f decode_gb_per_s=%.2f rel_err=%.5f bytes_per_mparam=%llu",
                  std::string(codec::to_string(c)).c_str(), both, gb / f.enc_s, gb / f.dec_s, f.rel_err,
                  static_cast<unsigned long long>(per_m));
    lines.push_back(line);
  }
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  return 0;
}
