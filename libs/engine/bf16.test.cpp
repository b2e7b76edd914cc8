// bf16: the conversion, the choice of precision, the probe under oneDNN's ISA
// cap (CTest runs this binary again with DNNL_MAX_CPU_ISA=AVX2 and
// =AVX512_CORE: libs/engine/CMakeLists.txt), and oneDNN's bf16 matmul against
// an fp64 product of the same bf16 inputs (skipped visibly without native bf16).
#include "libs/engine/bf16.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace loom::engine;

TEST_CASE("fp32 to bf16 rounds to nearest, ties to even, and keeps NaN, infinities and signs") {
  CHECK(to_bf16(1.0f) == 0x3f80);
  CHECK(from_bf16(to_bf16(1.0f)) == 1.0f);
  CHECK(to_bf16(-2.0f) == 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  CHECK(from_bf16(to_bf16(1.0f + 1.0f / 256)) == 1.0f);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  CHECK(from_bf16(to_bf16(1.0f + 3.0f / 256)) == 1.0f + 1.0f / 64);
  CHECK(from_bf16(to_bf16(1.0f + 1.5f / 256)) == 1.0f + 1.0f / 128);  // above halfway: up
  CHECK(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits in the low 16 bits alone is still a NaN, not infinity.
  std::uint32_t bits = 0x7f800001u;
  float low_nan;
  std::memcpy(&low_nan, &bits, sizeof low_nan);
  CHECK(std::isnan(from_bf16(to_bf16(low_nan))));
  // The largest finite float rounds to infinity, as the hardware's conversion does.
  CHECK(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::max()))));
  for (float x : {0.1f, -3.7e-3f, 12345.678f, 3.1e-30f}) {  // normal numbers: relative error
    const float back = from_bf16(to_bf16(x));
    CHECK(std::fabs(back - x) <= std::fabs(x) * (1.0f / 256));  // half an ulp of 8 bits
  }
}

TEST_CASE("the precision a run asks for: fp32 stays, bf16 and auto only where bf16 is native, with the reason") {
  CHECK(precision_from("fp32") == precision::fp32);
  CHECK(precision_from("bf16") == precision::bf16);
  CHECK(precision_from("auto") == precision::automatic);
  CHECK_FALSE(precision_from("fp16"));
  CHECK(to_string(precision::automatic) == "auto");
  const bf16_support native{true, "avx512_core_amx", "brg:avx512_core_amx", "native here"};
  const bf16_support emulated{false, "avx512_core", "gemm:jit", "would emulate"};
  CHECK(choose_precision(precision::fp32, native).used == precision::fp32);
  CHECK(choose_precision(precision::automatic, native).used == precision::bf16);
  CHECK(choose_precision(precision::bf16, native).used == precision::bf16);
  const auto fallback = choose_precision(precision::bf16, emulated);
  CHECK(fallback.used == precision::fp32);  // never a failure: the run trains, in fp32
  CHECK(fallback.why.find("bf16 trains in fp32") != std::string::npos);
  CHECK(fallback.why.find("would emulate") != std::string::npos);
  CHECK(choose_precision(precision::automatic, emulated).used == precision::fp32);
}

TEST_CASE("the bf16 probe follows oneDNN's effective ISA, DNNL_MAX_CPU_ISA included") {
  const bf16_support& s = probe_bf16();
  MESSAGE("bf16 probe: isa=" << s.isa << " impl=" << s.impl << " native=" << s.native << ": " << s.why);
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  const std::string capped = cap ? cap : "";
  if (capped == "AVX2") {  // below AVX-512 oneDNN has no bf16 matmul: auto is fp32
    CHECK_FALSE(s.native);
    CHECK(s.impl.empty());
    CHECK(choose_precision(precision::automatic, s).used == precision::fp32);
    CHECK(choose_precision(precision::automatic, s).why.find("avx2") != std::string::npos);
  } else if (capped == "AVX512_CORE") {  // AVX-512 without bf16 (or less, on an AVX2 machine): fp32
    CHECK(s.isa != "avx512_core_bf16");
    CHECK(s.isa != "avx512_core_amx");
    CHECK_FALSE(s.native);
    CHECK(choose_precision(precision::automatic, s).used == precision::fp32);
  } else {
    const bool instructions = s.isa == "avx512_core_bf16" || s.isa == "avx512_core_amx";
    CHECK(s.native == (instructions && s.impl.find("ref") == std::string::npos));
  }
}

TEST_CASE("oneDNN's bf16 matmul equals the fp64 product of the same bf16 inputs, and fp32's within bf16 rounding") {
  if (!probe_bf16().native) {
    MESSAGE("LOOM_TEST_SKIPPED: " << probe_bf16().why);
    return;
  }
  constexpr std::size_t M = 64, N = 96, K = 768;
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N);
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  std::vector<std::uint16_t> a16(a.size()), b16(b.size());
  to_bf16(a, a16);
  to_bf16(b, b16);
  auto mm = bf16_matmul::make(M, N, K);
  REQUIRE_MESSAGE(mm.ok(), mm.err().to_string());
  std::vector<float> c(M * N);
  mm->run(a16.data(), b16.data(), c.data());
  double worst_same = 0, worst_fp32 = 0;
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double same = 0, exact = 0, mag = 0;
      for (std::size_t k = 0; k < K; ++k) {
        same += double(from_bf16(a16[i * K + k])) * from_bf16(b16[k * N + j]);
        exact += double(a[i * K + k]) * b[k * N + j];
        mag += std::fabs(double(a[i * K + k]) * b[k * N + j]);
      }
      // The same bf16 inputs: only fp32 accumulation differs (K terms, 2^-24
      // each, far under 1e-5 of the magnitudes' sum).
      worst_same = std::max(worst_same, std::fabs(c[i * N + j] - same) / mag);
      // fp32 inputs: each product is off by at most 2·2^-9 (both inputs
      // rounded to 8 bits), so the sum by at most 2^-8 of the magnitudes' sum.
      worst_fp32 = std::max(worst_fp32, std::fabs(c[i * N + j] - exact) / mag);
    }
  MESSAGE("bf16 matmul (" << mm->impl() << "): worst error " << worst_same << " against the same inputs, "
                          << worst_fp32 << " against fp32's, relative to sum |a·b|");
  CHECK(worst_same < 1e-5);
  CHECK(worst_fp32 < 1.0 / 256);
}

TEST_CASE("a bf16 matmul of an empty shape is refused, naming the shape") {
  auto mm = bf16_matmul::make(0, 4, 4);
  REQUIRE_FALSE(mm.ok());
  CHECK(mm.code() == loom::errc::invalid_argument);
  CHECK(mm.err().message.find("0x4x4") != std::string::npos);
}
