// Training (the loop reads top to bottom in train_image_filter), inference
// and evaluation of the image filter.
#include "libs/vision/filter.hpp"

#include "libs/engine/optimizer.hpp"
#include "libs/vision/generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

namespace loom::vision {
namespace {

// Images per inference batch. The first conv's im2col is 432 KB per image:
// at 4 it stays in L2; at 32 (14 MB) classify ran 2.5x slower per image
// (435 vs 1080 images/s per core, vision_bench).
constexpr int infer_batch = 4;

std::vector<prepared_image> prepare_all(std::span<const media::image* const> imgs, int side) {
  std::vector<prepared_image> out(imgs.size());
#pragma omp parallel for schedule(dynamic, 8)
  for (std::size_t i = 0; i < imgs.size(); ++i) out[i] = prepare(*imgs[i], side);
  return out;
}

// x (B,S,S,3) and standardised hand features (B,hand) for items idx[0..B).
void fill_batch(const image_filter_model& m, std::span<const prepared_image> prep, const int* idx,
                const std::uint8_t* flips, int B, float* x, float* hand) {
  const int S = m.net.input;
  for (int b = 0; b < B; ++b) {
    const prepared_image& p = prep[idx[b]];
    to_input(p, S, flips && flips[b], x + std::size_t(b) * S * S * 3);
    for (int k = 0; k < m.net.hand; ++k) hand[b * m.net.hand + k] = (p.hand[k] - m.hand_mean[k]) / m.hand_std[k];
  }
}

// 2x2 average of the last block (B, s, s, C4) -> (B, 4*C4), ordered (qy, qx, c).
void pool_quadrants(const float* z, int B, int s, int C, float* out) {
  const int h = s / 2;
  const float inv = 1.0f / float(h * h);
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < 4; ++q) {
      float* o = out + (std::size_t(b) * 4 + q) * C;
      std::fill(o, o + C, 0.0f);
      for (int y = (q / 2) * h; y < (q / 2 + 1) * h; ++y)
        for (int x = (q % 2) * h; x < (q % 2 + 1) * h; ++x) {
          const float* v = z + ((std::size_t(b) * s + y) * s + x) * C;
          for (int c = 0; c < C; ++c) o[c] += v[c];
        }
      for (int c = 0; c < C; ++c) o[c] *= inv;
    }
}

std::array<float, num_labels> softmax(const float* logits) {
  std::array<float, num_labels> p{};
  const float mx = *std::max_element(logits, logits + num_labels);
  float sum = 0;
  for (int k = 0; k < num_labels; ++k) sum += p[k] = std::exp(logits[k] - mx);
  for (auto& v : p) v /= sum;
  return p;
}

// Runs every prepared image through the network in batches; fills
// probabilities and/or raw (unstandardised) quadrant features when asked.
void run_all(const image_filter_model& m, std::span<const prepared_image> prep,
             std::vector<std::array<float, num_labels>>* probs, std::vector<float>* feats) {
  const int S = m.net.input, n = static_cast<int>(prep.size()), D = embedding_dim(m.net);
  cnn_workspace ws(m.net, std::min(infer_batch, std::max(n, 1)));
  std::vector<float> x(std::size_t(infer_batch) * S * S * 3), hand(std::size_t(infer_batch) * std::max(m.net.hand, 1));
  std::vector<int> idx(infer_batch);
  if (probs) probs->resize(n);
  if (feats) feats->resize(std::size_t(n) * D);
  for (int at = 0; at < n; at += infer_batch) {
    const int B = std::min(infer_batch, n - at);
    std::iota(idx.begin(), idx.begin() + B, at);
    fill_batch(m, prep, idx.data(), nullptr, B, x.data(), hand.data());
    const float* logits = ws.forward(m.params.data(), x.data(), hand.data(), B);
    if (probs)
      for (int b = 0; b < B; ++b) (*probs)[at + b] = softmax(logits + b * m.net.classes);
    if (feats) pool_quadrants(ws.last_block(), B, S / 8, m.net.channels[3], feats->data() + std::size_t(at) * D);
  }
}

}  // namespace

int embedding_dim(const cnn_config& net) { return 4 * net.channels[3]; }

result<image_filter_model> train_image_filter(const filter_options& opt, std::span<const labelled_image> train) {
  if (auto st = opt.net.validate(); !st) return st.err();
  if (opt.net.classes != num_labels)
    return make_error(errc::invalid_argument, "train_image_filter: classes must be " + std::to_string(num_labels));
  if (opt.net.hand != 0 && opt.net.hand != hand_features)
    return make_error(errc::invalid_argument, "train_image_filter: hand must be 0 or " + std::to_string(hand_features));
  if (opt.epochs < 1 || opt.batch < 1 || !(opt.lr > 0))
    return make_error(errc::invalid_argument, "train_image_filter: epochs, batch and lr must be positive");
  if (train.empty()) return make_error(errc::invalid_argument, "train_image_filter: no training images");
  std::vector<const media::image*> imgs;
  for (std::size_t i = 0; i < train.size(); ++i) {
    if (train[i].img.width == 0 || train[i].img.height == 0)
      return make_error(errc::invalid_argument, "train_image_filter: image " + std::to_string(i) + " is empty");
    imgs.push_back(&train[i].img);
  }

  image_filter_model m;
  m.net = opt.net;
  const int S = m.net.input, H = std::max(m.net.hand, 1), n = static_cast<int>(train.size());
  const std::vector<prepared_image> prep = prepare_all(imgs, S);

  // Hand features are standardised with the training set's mean and std.
  for (int k = 0; k < m.net.hand; ++k) {
    double s = 0, s2 = 0;
    for (const auto& p : prep) s += p.hand[k], s2 += double(p.hand[k]) * p.hand[k];
    const double mean = s / n;
    m.hand_mean[k] = static_cast<float>(mean);
    m.hand_std[k] = static_cast<float>(std::max(1e-3, std::sqrt(std::max(0.0, s2 / n - mean * mean))));
  }

  m.params = init_params(m.net, opt.seed);
  const cnn_layout lay = make_layout(m.net);
  std::vector<float> grads(lay.total);
  std::vector<model::param_range> ranges;
  std::size_t at = 0;
  auto range = [&](std::size_t off, std::size_t end, bool decay) {
    ranges.push_back({off, end - off, decay});
    at = end;
  };
  for (int l = 0; l < 4; ++l) range(lay.conv_w[l], lay.conv_b[l], true), range(lay.conv_b[l], l < 3 ? lay.conv_w[l + 1] : lay.fc1_w, false);
  range(lay.fc1_w, lay.fc1_b, true), range(lay.fc1_b, lay.fc2_w, false);
  range(lay.fc2_w, lay.fc2_b, true), range(lay.fc2_b, lay.total, false);
  engine::adamw optim(lay.total, {0.9f, 0.999f, 1e-8f, opt.weight_decay}, ranges);

  const int B = std::min(opt.batch, n), steps_per_epoch = (n + B - 1) / B;
  engine::lr_schedule sched{opt.lr, opt.lr / 20, std::max(1, steps_per_epoch / 2), opt.epochs * steps_per_epoch};
  cnn_workspace ws(m.net, B);
  std::vector<float> x(std::size_t(B) * S * S * 3), hand(std::size_t(B) * H);
  std::vector<int> order(n);
  std::vector<std::int32_t> targets(B);
  std::vector<std::uint8_t> flips(B);
  std::mt19937_64 rng(opt.seed * 0xD1B54A32D192ED03ull + 3);
  int step = 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % std::uint64_t(i + 1)]);  // Fisher-Yates, our bits
    double loss_sum = 0;
    int right = 0, seen = 0;
    for (int s0 = 0; s0 < n; s0 += B) {
      const int b = std::min(B, n - s0);
      for (int i = 0; i < b; ++i) {
        targets[i] = static_cast<std::int32_t>(train[order[s0 + i]].label);
        flips[i] = opt.flip ? static_cast<std::uint8_t>(rng() & 1) : 0;
      }
      fill_batch(m, prep, order.data() + s0, flips.data(), b, x.data(), hand.data());
      const float* logits = ws.forward(m.params.data(), x.data(), hand.data(), b);
      for (int i = 0; i < b; ++i) {
        const float* l = logits + i * num_labels;
        right += std::max_element(l, l + num_labels) - l == targets[i];
      }
      const float loss = ws.backward(m.params.data(), grads.data(), targets.data(), b);
      loss_sum += double(loss) * b, seen += b;
      const float scale = engine::clip_scale(engine::global_norm(grads), opt.clip);
      optim.step(m.params, grads, sched.at(step++), scale);
    }
    if (!std::isfinite(loss_sum))
      return make_error(errc::internal, "train_image_filter: the loss diverged in epoch " + std::to_string(epoch + 1) +
                                            " (lower lr)");
    if (opt.on_epoch) opt.on_epoch(epoch + 1, static_cast<float>(loss_sum / seen), float(right) / float(seen));
  }

  // Embedding statistics over the training set.
  std::vector<float> feats;
  run_all(m, prep, nullptr, &feats);
  const int D = embedding_dim(m.net);
  m.embed_mean.assign(D, 0.0f);
  m.embed_std.assign(D, 1.0f);
  for (int d = 0; d < D; ++d) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; ++i) s += feats[std::size_t(i) * D + d], s2 += double(feats[std::size_t(i) * D + d]) * feats[std::size_t(i) * D + d];
    const double mean = s / n;
    m.embed_mean[d] = static_cast<float>(mean);
    m.embed_std[d] = static_cast<float>(std::max(1e-3, std::sqrt(std::max(0.0, s2 / n - mean * mean))));
  }
  return m;
}

result<image_filter_model> train_image_filter_generated(const filter_options& opt, int per_class,
                                                        std::uint64_t data_seed) {
  if (per_class < 1) return make_error(errc::invalid_argument, "train_image_filter: per_class must be >= 1");
  const auto set = generate_set(data_seed, per_class);
  return train_image_filter(opt, set);
}

classification classify(const image_filter_model& model, const media::image& img) {
  return classify_all(model, std::span(&img, 1)).front();
}

namespace {
std::vector<classification> classify_ptrs(const image_filter_model& model, std::span<const media::image* const> ptrs) {
  const auto prep = prepare_all(ptrs, model.net.input);
  std::vector<std::array<float, num_labels>> probs;
  run_all(model, prep, &probs, nullptr);
  std::vector<classification> out(ptrs.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].probabilities = probs[i];
    out[i].label = static_cast<image_label>(std::max_element(probs[i].begin(), probs[i].end()) - probs[i].begin());
  }
  return out;
}
}  // namespace

std::vector<classification> classify_all(const image_filter_model& model, std::span<const media::image> imgs) {
  std::vector<const media::image*> ptrs;
  for (const auto& i : imgs) ptrs.push_back(&i);
  return classify_ptrs(model, ptrs);
}

std::vector<float> embed(const image_filter_model& model, const media::image& img) {
  const std::vector<prepared_image> prep{prepare(img, model.net.input)};
  std::vector<float> f;
  run_all(model, prep, nullptr, &f);
  double norm = 0;
  for (std::size_t d = 0; d < f.size(); ++d) {
    f[d] = (f[d] - model.embed_mean[d]) / model.embed_std[d];
    norm += double(f[d]) * f[d];
  }
  const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
  for (auto& v : f) v *= inv;
  return f;
}

std::vector<float> embed_mirror_invariant(const image_filter_model& model, const media::image& img) {
  const int side = model.net.input;
  std::vector<prepared_image> prep{prepare(img, side)};
  prep.push_back(prep[0]);  // the mirror: its S x S input flipped, the hand features (mirror-blind) kept
  auto& rgb = prep[1].rgb;
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side / 2; ++x)
      for (int c = 0; c < 3; ++c)
        std::swap(rgb[(std::size_t(y) * side + x) * 3 + c], rgb[(std::size_t(y) * side + (side - 1 - x)) * 3 + c]);
  std::vector<float> f;
  run_all(model, prep, nullptr, &f);  // (2, dim)
  const std::size_t dim = f.size() / 2;
  std::vector<float> out(dim);
  double norm = 0;
  for (std::size_t d = 0; d < dim; ++d) {
    out[d] = (f[d] - model.embed_mean[d]) / model.embed_std[d] + (f[dim + d] - model.embed_mean[d]) / model.embed_std[d];
    norm += double(out[d]) * out[d];
  }
  const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
  for (auto& v : out) v *= inv;
  return out;
}

int confusion::total() const {
  int t = 0;
  for (const auto& r : counts)
    for (int c : r) t += c;
  return t;
}

double confusion::accuracy() const {
  int right = 0;
  for (int i = 0; i < num_labels; ++i) right += counts[i][i];
  return total() ? double(right) / total() : 0.0;
}

std::string confusion::to_string() const {
  std::string s = "truth \\ predicted";
  char buf[64];
  for (auto n : label_names) std::snprintf(buf, sizeof buf, " %11.11s", std::string(n).c_str()), s += buf;
  s += '\n';
  for (int i = 0; i < num_labels; ++i) {
    std::snprintf(buf, sizeof buf, "%-17s", std::string(label_names[i]).c_str());
    s += buf;
    for (int j = 0; j < num_labels; ++j) std::snprintf(buf, sizeof buf, " %11d", counts[i][j]), s += buf;
    s += '\n';
  }
  return s;
}

confusion evaluate(const image_filter_model& model, std::span<const labelled_image> set) {
  std::vector<const media::image*> ptrs;
  for (const auto& e : set) ptrs.push_back(&e.img);
  const auto got = classify_ptrs(model, ptrs);
  confusion c;
  for (std::size_t i = 0; i < set.size(); ++i) ++c.counts[static_cast<int>(set[i].label)][static_cast<int>(got[i].label)];
  return c;
}

}  // namespace loom::vision
