// The CPU kernels of the GPT-2 engine: forward and hand-written backward of
// every op, fp32. Matmuls go through oneDNN's dnnl_sgemm; the rest are OpenMP
// loops. Every reduction runs in a fixed order (no atomics), so the same inputs
// and thread count give bitwise-identical outputs; all kernels except the
// matmuls are also independent of the thread count.
// Callers own every buffer; kernels allocate nothing. Call from one thread.
// Shapes: B batch, T time, C channels, NH heads, N = B*T rows, OC out channels,
// V real vocab, Vp padded vocab (row stride of logits).
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::engine::kernels {

// Threads for every kernel and for oneDNN's sgemm (one OpenMP pool). Results
// are bitwise-reproducible for a fixed count. REQUIRES: n >= 1.
void set_threads(int n);
int threads();

// exp(x) to ~2 ulp for x in [-87, 88] (clamped outside), written so loops
// over it vectorize. Used by softmax, cross-entropy and GELU.
float exp_approx(float x);

// out (B,T,C) = wte[tokens[b,t]] (V,C) + wpe[t] (maxT,C).  tokens (B,T).
void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     int B, int T, int C);
// dwte (V,C) += scatter of dout (B,T,C) by token; dwpe (T,C) += sum over b
// (accumulate = false: dwpe's first T rows are overwritten instead; dwte always adds).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      int B, int T, int C, bool accumulate = true);

// out (N,C) = (inp - mean) * rstd * weight (C) + bias (C); mean, rstd (N) saved
// for backward. eps = 1e-5 (GPT-2's).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C);
// dinp (N,C) += ... (always adds: dinp is the residual stream's gradient);
// dweight (C), dbias (C) += ... (accumulate = false: overwritten).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C, bool accumulate = true);

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC). bias may be null.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC);
// dinp (N,C) = dout (N,OC) · weight (OC,C)   (overwrites)
// dweight (OC,C) += doutᵀ · inp;  dbias (OC) += column sums of dout (may be null)
// (accumulate = false: dweight and dbias are overwritten).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC,
                     bool accumulate = true);

// dbias (OC) += column sums of dout (N,OC) (accumulate = false: overwritten),
// in a fixed order (matmul_backward's; the bf16 path's too).
void bias_backward(float* dbias, const float* dout, int N, int OC, bool accumulate = true);

// Causal self-attention. qkv (B,T,3C) holds q | k | v, each split into NH heads
// of C/NH channels. att (B,NH,T,T): softmax rows (zero above the diagonal),
// saved for backward. out (B,T,C).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv (B,T,3C) = ... (overwrites). scratch: B*NH*T floats.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH);

// Attention's softmax as a separate pass (the batched bf16 attention,
// attention_bf16.hpp): s (BH,T,T) holds raw scores q·k per head; each row t
// becomes softmax(scale·s[t, 0..t]) with zeros above the diagonal, in place.
void causal_softmax_forward(float* s, int BH, int T, float scale);
// ds (BH,T,T) = scale · P ∘ (dP − Σ_t2 P·dP) for t2 <= t, 0 above (ds may
// alias dp), with P as attention keeps it: bf16 (uint16 bit patterns, bf16.hpp).
void causal_softmax_backward_bf16p(float* ds, const std::uint16_t* p, const float* dp, int BH, int T, float scale);

// GELU, tanh approximation, elementwise over n values.
void gelu_forward(float* out, const float* inp, std::size_t n);
// dinp = gelu'(inp) * dout (overwrites); dinp may alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n);

// out = a + b over n values.
void residual_forward(float* out, const float* a, const float* b, std::size_t n);
// da += dout; db += dout. (The model passes the residual gradient through in
// place instead; kept as the op's reference backward.)
void residual_backward(float* da, float* db, const float* dout, std::size_t n);

// Per-row softmax cross-entropy over the first V of Vp columns of logits (N,Vp):
// losses (N) = lse - logits[target], lse (N) = log Σ exp(logits) saved for backward.
// REQUIRES: 0 <= targets[i] < V.
void crossentropy_forward(float* losses, float* lse, const float* logits,
                          const std::int32_t* targets, int N, int V, int Vp);
// dlogits (N,Vp) = row_scale[i] * (softmax - onehot(target)) for columns < V,
// 0 for padding columns (overwrites). dlogits may be the logits buffer itself.
void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const std::int32_t* targets, const float* row_scale, int N, int V,
                           int Vp);

}  // namespace loom::engine::kernels
