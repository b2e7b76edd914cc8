#include "libs/engine/bf16.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

namespace loom::engine {
namespace {

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::all: return "all";
    default: return "isa " + std::to_string(static_cast<int>(isa));
  }
}

bool has_bf16_instructions(dnnl::cpu_isa isa) {
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// The primitive descriptor of C = A·B for bf16 A, B and fp32 C, or an error.
result<dnnl::matmul::primitive_desc> matmul_pd(const dnnl::engine& eng, std::size_t M, std::size_t N, std::size_t K) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const auto m = static_cast<dnnl::memory::dim>(M), n = static_cast<dnnl::memory::dim>(N),
             k = static_cast<dnnl::memory::dim>(K);
  try {
    dnnl::memory::desc a({m, k}, dt::bf16, tag::ab), b({k, n}, dt::bf16, tag::ab), c({m, n}, dt::f32, tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), eng);
  } catch (const dnnl::error& e) {
    return make_error(errc::unavailable, std::string("oneDNN has no bf16 matmul here (") +
                                             isa_name(dnnl::get_effective_cpu_isa()) + "): " + e.what());
  }
}

}  // namespace

std::string_view to_string(precision p) {
  switch (p) {
    case precision::fp32: return "fp32";
    case precision::bf16: return "bf16";
    case precision::automatic: return "auto";
  }
  return "fp32";
}

std::optional<precision> precision_from(std::string_view s) {
  if (s == "fp32") return precision::fp32;
  if (s == "bf16") return precision::bf16;
  if (s == "auto") return precision::automatic;
  return std::nullopt;
}

const bf16_support& probe_bf16() {
  static const bf16_support s = [] {
    bf16_support out;
    const auto isa = dnnl::get_effective_cpu_isa();
    out.isa = isa_name(isa);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    auto pd = matmul_pd(eng, 256, 256, 256);
    if (!pd) {
      out.why = "oneDNN has no bf16 matmul on " + out.isa;
      return out;
    }
    out.impl = pd->impl_info_str();
    // "ref" is oneDNN's reference loop nest; on AVX-512 without bf16
    // instructions its jitted kernels convert in software.
    const bool reference = out.impl.find("ref") != std::string::npos;
    out.native = has_bf16_instructions(isa) && !reference;
    out.why = out.native ? "oneDNN multiplies bf16 natively here (" + out.isa + ", " + out.impl + ")"
                         : "oneDNN would emulate bf16 here (" + out.isa + ", " + out.impl +
                               "): no AMX or AVX512-BF16, slower than fp32";
    return out;
  }();
  return s;
}

precision_choice choose_precision(precision asked, const bf16_support& s) {
  if (asked == precision::fp32) return {precision::fp32, "fp32 as asked"};
  if (s.native) return {precision::bf16, std::string(to_string(asked)) + ": " + s.why};
  return {precision::fp32, std::string(to_string(asked)) + " trains in fp32: " + s.why};
}

void to_bf16(std::span<const float> in, std::span<std::uint16_t> out) {
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_bf16(in[i]);
}

struct bf16_matmul::impl_t {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::string name;
};

bf16_matmul::bf16_matmul(std::unique_ptr<impl_t> p) : p_(std::move(p)) {}
bf16_matmul::~bf16_matmul() = default;
bf16_matmul::bf16_matmul(bf16_matmul&&) noexcept = default;
bf16_matmul& bf16_matmul::operator=(bf16_matmul&&) noexcept = default;

result<bf16_matmul> bf16_matmul::make(std::size_t M, std::size_t N, std::size_t K) {
  if (M == 0 || N == 0 || K == 0)
    return make_error(errc::invalid_argument, "bf16_matmul: shape " + std::to_string(M) + "x" + std::to_string(N) +
                                                  "x" + std::to_string(K) + " has a zero");
  auto p = std::make_unique<impl_t>();
  auto pd = matmul_pd(p->eng, M, N, K);
  if (!pd) return pd.err();
  p->pd = *pd;
  p->prim = dnnl::matmul(p->pd);
  p->name = p->pd.impl_info_str();
  return bf16_matmul(std::move(p));
}

void bf16_matmul::run(const std::uint16_t* A, const std::uint16_t* B, float* C) {
  dnnl::memory a(p_->pd.src_desc(), p_->eng, const_cast<std::uint16_t*>(A));
  dnnl::memory b(p_->pd.weights_desc(), p_->eng, const_cast<std::uint16_t*>(B));
  dnnl::memory c(p_->pd.dst_desc(), p_->eng, C);
  p_->prim.execute(p_->strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  p_->strm.wait();
}

const std::string& bf16_matmul::impl() const { return p_->name; }

struct bf16_gemm::cache {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  struct entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  std::map<std::tuple<std::size_t, bool, bool, std::size_t, std::size_t, std::size_t, bool>, entry> prims;
  // One scratchpad for every primitive (scratchpad_mode::user), as large as
  // the largest needs: in oneDNN's own mode each primitive kept its own, and
  // a d12 step at B·T = 2048 held ~0.9 GB of them beside a 3.7 GB model.
  struct aligned_free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, aligned_free> scratch;
  std::size_t scratch_bytes = 0;
};

bf16_gemm::bf16_gemm() : c_(std::make_unique<cache>()) {}
bf16_gemm::~bf16_gemm() = default;
bf16_gemm::bf16_gemm(bf16_gemm&&) noexcept = default;
bf16_gemm& bf16_gemm::operator=(bf16_gemm&&) noexcept = default;
std::size_t bf16_gemm::shapes() const { return c_->prims.size(); }
std::size_t bf16_gemm::scratchpad_bytes() const { return c_->scratch_bytes; }

status bf16_gemm::run(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, const std::uint16_t* A,
                      const std::uint16_t* B, float* C, bool accumulate) {
  return run_batched(1, trans_a, trans_b, M, N, K, A, B, C, accumulate);
}

status bf16_gemm::run_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t M, std::size_t N,
                              std::size_t K, const std::uint16_t* A, const std::uint16_t* B, float* C,
                              bool accumulate) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const auto key = std::make_tuple(batch, trans_a, trans_b, M, N, K, accumulate);
  auto it = c_->prims.find(key);
  if (it == c_->prims.end()) {
    const auto m = static_cast<dnnl::memory::dim>(M), n = static_cast<dnnl::memory::dim>(N),
               k = static_cast<dnnl::memory::dim>(K), nb = static_cast<dnnl::memory::dim>(batch);
    try {
      // A stored K×M is op(A) = M×K in column-major order: tag ba (acb with a
      // batch in front); B likewise.
      auto desc = [&](dnnl::memory::dim r, dnnl::memory::dim c, dt t, bool trans) {
        if (batch == 1) return dnnl::memory::desc({r, c}, t, trans ? tag::ba : tag::ab);
        return dnnl::memory::desc({nb, r, c}, t, trans ? tag::acb : tag::abc);
      };
      dnnl::memory::desc a = desc(m, k, dt::bf16, trans_a), b = desc(k, n, dt::bf16, trans_b),
                         c = desc(m, n, dt::f32, false);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.0f);  // C += A·B, in fp32
        attr.set_post_ops(ops);
      }
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, c_->eng);
      const std::size_t need = pd.scratchpad_desc().get_size();
      if (need > c_->scratch_bytes) {
        const std::size_t bytes = (need + 4095) / 4096 * 4096;
        void* p = std::aligned_alloc(4096, bytes);
        if (!p) return make_error(errc::resource_exhausted, "bf16 matmul: cannot allocate its " +
                                                                std::to_string(bytes >> 20) + " MiB scratchpad");
        c_->scratch.reset(p);
        c_->scratch_bytes = bytes;
      }
      it = c_->prims.emplace(key, cache::entry{pd, dnnl::matmul(pd)}).first;
    } catch (const dnnl::error& e) {
      return make_error(errc::unavailable, "bf16 matmul " + std::to_string(batch) + "x" + std::to_string(M) + "x" +
                                               std::to_string(N) + "x" + std::to_string(K) + ": oneDNN has none here (" +
                                               isa_name(dnnl::get_effective_cpu_isa()) + "): " + e.what());
    }
  }
  const auto& e = it->second;
  dnnl::memory a(e.pd.src_desc(), c_->eng, const_cast<std::uint16_t*>(A));
  dnnl::memory b(e.pd.weights_desc(), c_->eng, const_cast<std::uint16_t*>(B));
  dnnl::memory c(e.pd.dst_desc(), c_->eng, C);
  dnnl::memory s(e.pd.scratchpad_desc(), c_->eng, c_->scratch.get());
  e.prim.execute(c_->strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, s}});
  c_->strm.wait();
  return ok_status();
}

void to_bf16_parallel(const float* in, std::uint16_t* out, std::size_t n) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = to_bf16(in[i]);
}

}  // namespace loom::engine
