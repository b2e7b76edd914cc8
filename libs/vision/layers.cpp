#include "libs/vision/layers.hpp"

#include "libs/engine/kernels.hpp"

#include <algorithm>
#include <cstring>

namespace loom::vision::kernels {

void im2col3x3(float* col, const float* inp, int B, int H, int W, int C) {
  const std::size_t K = std::size_t(9) * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        float* row = col + ((std::size_t(b) * H + y) * W + x) * K;
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            float* dst = row + std::size_t(ky * 3 + kx) * C;
            const int sy = y + ky - 1, sx = x + kx - 1;
            if (sy < 0 || sy >= H || sx < 0 || sx >= W) {
              std::memset(dst, 0, sizeof(float) * C);
            } else {
              std::memcpy(dst, inp + ((std::size_t(b) * H + sy) * W + sx) * C, sizeof(float) * C);
            }
          }
      }
}

void col2im3x3(float* dinp, const float* dcol, int B, int H, int W, int C) {
  const std::size_t K = std::size_t(9) * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        float* d = dinp + ((std::size_t(b) * H + y) * W + x) * C;
        std::fill(d, d + C, 0.0f);
        // Output pixel (oy, ox) read this pixel through tap (ky, kx) = (y-oy+1, x-ox+1).
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int oy = y - ky + 1, ox = x - kx + 1;
            if (oy < 0 || oy >= H || ox < 0 || ox >= W) continue;
            const float* s = dcol + ((std::size_t(b) * H + oy) * W + ox) * K + std::size_t(ky * 3 + kx) * C;
            for (int c = 0; c < C; ++c) d[c] += s[c];
          }
      }
}

void conv3x3_forward(float* out, float* col, const float* inp, const float* weight, const float* bias,
                     int B, int H, int W, int C, int OC) {
  im2col3x3(col, inp, B, H, W, C);
  engine::kernels::matmul_forward(out, col, weight, bias, B * H * W, 9 * C, OC);
}

void conv3x3_backward(float* dinp, float* dweight, float* dbias, float* dcol, const float* dout,
                      const float* col, const float* weight, int B, int H, int W, int C, int OC,
                      bool accumulate) {
  // dcol (N,9C) = dout·W; dW += doutᵀ·col; dbias += column sums.
  engine::kernels::matmul_backward(dcol, dweight, dbias, dout, col, weight, B * H * W, 9 * C, OC,
                                   accumulate);
  if (dinp) col2im3x3(dinp, dcol, B, H, W, C);
}

void relu_forward(float* x, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(float* d, const float* out, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) d[i] = out[i] > 0.0f ? d[i] : 0.0f;
}

void maxpool2_forward(float* out, std::uint8_t* arg, const float* inp, int B, int H, int W, int C) {
  const int OH = H / 2, OW = W / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int oy = 0; oy < OH; ++oy)
      for (int ox = 0; ox < OW; ++ox) {
        const std::size_t o = ((std::size_t(b) * OH + oy) * OW + ox) * C;
        for (int c = 0; c < C; ++c) {
          float best = 0.0f;
          std::uint8_t who = 0;
          for (int k = 0; k < 4; ++k) {
            const int y = 2 * oy + k / 2, x = 2 * ox + k % 2;
            const float v = inp[((std::size_t(b) * H + y) * W + x) * C + c];
            if (k == 0 || v > best) best = v, who = static_cast<std::uint8_t>(k);
          }
          out[o + c] = best;
          arg[o + c] = who;
        }
      }
}

void maxpool2_backward(float* dinp, const float* dout, const std::uint8_t* arg, int B, int H, int W, int C) {
  const int OH = H / 2, OW = W / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const int k = (y % 2) * 2 + x % 2;
        const std::size_t o = ((std::size_t(b) * OH + y / 2) * OW + x / 2) * C;
        float* d = dinp + ((std::size_t(b) * H + y) * W + x) * C;
        for (int c = 0; c < C; ++c) d[c] = arg[o + c] == k ? dout[o + c] : 0.0f;
      }
}

void avgpool_forward(float* out, const float* inp, int B, int HW, int C) {
  const float inv = 1.0f / float(HW);
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; ++b) {
    float* o = out + std::size_t(b) * C;
    std::fill(o, o + C, 0.0f);
    for (int p = 0; p < HW; ++p) {
      const float* s = inp + (std::size_t(b) * HW + p) * C;
      for (int c = 0; c < C; ++c) o[c] += s[c];
    }
    for (int c = 0; c < C; ++c) o[c] *= inv;
  }
}

void avgpool_backward(float* dinp, const float* dout, int B, int HW, int C) {
  const float inv = 1.0f / float(HW);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < HW; ++p) {
      float* d = dinp + (std::size_t(b) * HW + p) * C;
      const float* g = dout + std::size_t(b) * C;
      for (int c = 0; c < C; ++c) d[c] = g[c] * inv;
    }
}

void maxpool_global_forward(float* out, std::int32_t* arg, const float* inp, int B, int HW, int C) {
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; ++b) {
    float* o = out + std::size_t(b) * C;
    std::int32_t* a = arg + std::size_t(b) * C;
    const float* first = inp + std::size_t(b) * HW * C;
    std::copy(first, first + C, o);
    std::fill(a, a + C, 0);
    for (int p = 1; p < HW; ++p) {
      const float* s = first + std::size_t(p) * C;
      for (int c = 0; c < C; ++c)
        if (s[c] > o[c]) o[c] = s[c], a[c] = p;
    }
  }
}

void maxpool_global_backward(float* dinp, const float* dout, const std::int32_t* arg, int B, int HW, int C) {
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      dinp[(std::size_t(b) * HW + arg[std::size_t(b) * C + c]) * C + c] += dout[std::size_t(b) * C + c];
}

}  // namespace loom::vision::kernels
