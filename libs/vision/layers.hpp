// The CNN kernels of loom::vision: 3x3 convolution as im2col + sgemm (the
// engine's matmul_forward/backward, oneDNN's dnnl_sgemm underneath), ReLU,
// 2x2 max pooling, global average pooling. fp32, NHWC. Every loop outside
// the sgemms writes each output from a fixed-order sum (gathers, no atomics),
// so results are bitwise the same for a fixed thread count.
// Callers own every buffer; kernels allocate nothing. Call from one thread.
// Shapes: B batch, H x W spatial, C in channels, OC out channels, N = B*H*W.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::vision::kernels {

// col (N, 9C) from inp (B,H,W,C): row (b,y,x) holds the 3x3 neighbourhood,
// ordered (ky, kx, c), zero outside the image (padding 1, stride 1).
void im2col3x3(float* col, const float* inp, int B, int H, int W, int C);
// dinp (B,H,W,C) = the sum of every dcol (N, 9C) entry that read it (overwrites).
void col2im3x3(float* dinp, const float* dcol, int B, int H, int W, int C);

// out (B,H,W,OC) = conv3x3(inp (B,H,W,C)) with weight (OC, 9C), bias (OC);
// col (N, 9C) receives im2col(inp) and is kept for backward.
void conv3x3_forward(float* out, float* col, const float* inp, const float* weight, const float* bias,
                     int B, int H, int W, int C, int OC);
// dweight (OC, 9C) and dbias (OC) += ... (accumulate = false: overwritten);
// dinp (B,H,W,C) = ... (overwrites; nullptr skips it, for the first layer);
// dcol (N, 9C) is scratch.
void conv3x3_backward(float* dinp, float* dweight, float* dbias, float* dcol, const float* dout,
                      const float* col, const float* weight, int B, int H, int W, int C, int OC,
                      bool accumulate = true);

// x = max(x, 0) over n values, in place.
void relu_forward(float* x, std::size_t n);
// d = d where out > 0, else 0 (in place); out is the ReLU's output.
void relu_backward(float* d, const float* out, std::size_t n);

// out (B,H/2,W/2,C) = max over each 2x2 window of inp (B,H,W,C); arg (same
// shape as out) = the winner's index in the window, 0..3 (first max wins).
// REQUIRES: H, W even.
void maxpool2_forward(float* out, std::uint8_t* arg, const float* inp, int B, int H, int W, int C);
// dinp (B,H,W,C) = dout routed to each window's winner, 0 elsewhere (overwrites).
void maxpool2_backward(float* dinp, const float* dout, const std::uint8_t* arg, int B, int H, int W, int C);

// out (B,C) = mean over the HW positions of inp (B,HW,C).
void avgpool_forward(float* out, const float* inp, int B, int HW, int C);
// dinp (B,HW,C) = dout (B,C) / HW at every position (overwrites).
void avgpool_backward(float* dinp, const float* dout, int B, int HW, int C);

// out (B,C) = max over the HW positions of inp (B,HW,C); arg (B,C) = the
// winning position (first max wins).
void maxpool_global_forward(float* out, std::int32_t* arg, const float* inp, int B, int HW, int C);
// dinp (B,HW,C) += dout (B,C) at each channel's winning position (adds:
// the average pool's gradient is already there).
void maxpool_global_backward(float* dinp, const float* dout, const std::int32_t* arg, int B, int HW, int C);

}  // namespace loom::vision::kernels
