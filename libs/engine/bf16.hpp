// bf16: whether this CPU multiplies bf16 natively, which precision a run
// trains in, and a bf16 matmul through oneDNN (issue 28). oneDNN runs a bf16
// matmul on AMX or AVX512-BF16 at several times its fp32 speed; on AVX-512
// without bf16 instructions it emulates bf16 (~1/15 of fp32), and below
// AVX-512 it has no bf16 matmul at all. So bf16 is used only where oneDNN's
// effective ISA (the CPU's, capped by $DNNL_MAX_CPU_ISA) has the
// instructions and the implementation it picks for a bf16 matmul is a native
// one. A run asked for bf16 where they are missing trains in fp32 and says
// why (a snapshot resumed on another machine kind keeps going).
// probe_bf16() is computed once per process and is thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace loom::engine {

enum class precision { fp32, bf16, automatic };
std::string_view to_string(precision p);  // "fp32", "bf16", "auto"
std::optional<precision> precision_from(std::string_view s);

struct bf16_support {
  bool native = false;  // oneDNN multiplies bf16 on AMX or AVX512-BF16 here
  std::string isa;      // oneDNN's effective ISA ("avx512_core_bf16", "avx2", ...)
  std::string impl;     // its implementation of a bf16 matmul ("" when it has none)
  std::string why;      // one sentence: why bf16 runs natively here, or why not
};
const bf16_support& probe_bf16();

struct precision_choice {
  precision used = precision::fp32;  // fp32 or bf16, never automatic
  std::string why;
};
// fp32 stays fp32; bf16 and auto give bf16 where `s` is native, else fp32
// with the reason (a bf16 request that cannot be met is not a failure).
precision_choice choose_precision(precision asked, const bf16_support& s);

// Round to nearest even, as the hardware converts (NaN kept a NaN). Inline:
// loops over it (AdamW's fused copy, activations) vectorise.
inline std::uint16_t to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // a NaN stays one (quiet)
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}
inline float from_bf16(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }
void to_bf16(std::span<const float> in, std::span<std::uint16_t> out);

// C[M×N] (fp32) = A[M×K] · B[K×N], A and B bf16, row-major, fp32
// accumulation: oneDNN's matmul primitive, made once for its shape.
class bf16_matmul {
 public:
  // invalid_argument for a shape with a zero, unavailable where oneDNN has no
  // bf16 matmul (the error names its ISA).
  static result<bf16_matmul> make(std::size_t M, std::size_t N, std::size_t K);
  ~bf16_matmul();
  bf16_matmul(bf16_matmul&&) noexcept;
  bf16_matmul& operator=(bf16_matmul&&) noexcept;
  // REQUIRES: A holds M·K, B K·N and C M·N values.
  void run(const std::uint16_t* A, const std::uint16_t* B, float* C);
  const std::string& impl() const;

 private:
  struct impl_t;
  explicit bf16_matmul(std::unique_ptr<impl_t> p);
  std::unique_ptr<impl_t> p_;
};

// C (M×N, fp32) = op(A)·op(B), or += with accumulate; A and B bf16, row-major,
// op(A) M×K (A stored K×M when trans_a), op(B) K×N (B stored N×K when
// trans_b). One oneDNN matmul primitive per shape, made at its first use and
// kept (a training step has a dozen shapes). Transposes are memory layouts,
// never copies. One thread calls it (the model's).
class bf16_gemm {
 public:
  bf16_gemm();
  ~bf16_gemm();
  bf16_gemm(bf16_gemm&&) noexcept;
  bf16_gemm& operator=(bf16_gemm&&) noexcept;
  // unavailable where oneDNN has no bf16 matmul (the first call of a shape).
  status run(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, const std::uint16_t* A,
             const std::uint16_t* B, float* C, bool accumulate);
  // `batch` independent products at once (attention's heads): A holds batch
  // matrices of M·K values one after another, B of K·N, C of M·N; each as run().
  status run_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                     const std::uint16_t* A, const std::uint16_t* B, float* C, bool accumulate);
  std::size_t shapes() const;
  // The one scratchpad every shape shares (the largest any needs).
  std::size_t scratchpad_bytes() const;

 private:
  struct cache;
  std::unique_ptr<cache> c_;
};

// The fp32 values of `in` rounded to bf16, in parallel (OpenMP).
void to_bf16_parallel(const float* in, std::uint16_t* out, std::size_t n);

}  // namespace loom::engine
