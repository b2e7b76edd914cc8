#include "libs/codec/error_feedback.hpp"

#include <algorithm>
#include <cmath>

namespace loom::codec {

error_feedback::error_feedback(std::size_t n, codec_id c, options o) : codec_(c), opts_(o), e_(n, 0.0f) {}

status error_feedback::encode_into(std::span<const float> delta, std::vector<std::byte>& payload) {
  if (delta.size() != e_.size())
    return make_error(errc::invalid_argument, "delta has " + std::to_string(delta.size()) +
                                                  " values, the error-feedback residual " +
                                                  std::to_string(e_.size()));
  if (const std::size_t bad = first_non_finite(delta); bad < delta.size())
    return make_error(errc::invalid_argument, "delta value at index " + std::to_string(bad) +
                                                  " is not finite: non-finite deltas are rejected");
  float* e = e_.data();
  const float* d = delta.data();
  const std::size_t n = e_.size();
  for (std::size_t i = 0; i < n; ++i) e[i] += d[i];
  if (auto s = loom::codec::encode_into(codec_, e_, opts_, payload); !s.ok()) {
    for (std::size_t i = 0; i < n; ++i) e[i] -= d[i];
    return s;
  }
  if (auto s = decode_add(payload, e_, -1.0f); !s.ok())
    return make_error(errc::internal, "error feedback cannot decode its own payload: " + s.err().message);
  return ok_status();
}

result<std::vector<std::byte>> error_feedback::encode(std::span<const float> delta) {
  std::vector<std::byte> q;
  if (auto s = encode_into(delta, q); !s.ok()) return s.err();
  return q;
}

double error_feedback::residual_norm() const {
  double s = 0;
  for (float v : e_) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

void error_feedback::reset() { std::fill(e_.begin(), e_.end(), 0.0f); }

status error_feedback::restore(std::span<const float> residual) {
  if (residual.size() != e_.size())
    return make_error(errc::invalid_argument, "a residual of " + std::to_string(residual.size()) +
                                                  " values for a stream of " + std::to_string(e_.size()));
  if (const std::size_t bad = first_non_finite(residual); bad < residual.size())
    return make_error(errc::invalid_argument, "residual value at index " + std::to_string(bad) + " is not finite");
  std::copy(residual.begin(), residual.end(), e_.begin());
  return ok_status();
}

status error_feedback::adopt(std::vector<float> residual) {
  if (const std::size_t bad = first_non_finite(residual); bad < residual.size())
    return make_error(errc::invalid_argument, "residual value at index " + std::to_string(bad) + " is not finite");
  e_ = std::move(residual);
  return ok_status();
}

}  // namespace loom::codec
