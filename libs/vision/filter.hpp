// The learned image filter (issue 33, part 4): a small CNN that labels an
// image ok / blank / blurred / corrupted / mostly_text and embeds it for
// semantic dedup. image_filter_model is a plain value (config + weights +
// the statistics features are standardised with); every function here only
// reads it, so one model serves any number of threads, each call allocating
// its own workspace. Training and inference use the OpenMP pool set by
// engine::kernels::set_threads: same seed + thread count -> same weights.
#pragma once

#include "libs/media/image.hpp"
#include "libs/status/status.hpp"
#include "libs/vision/features.hpp"
#include "libs/vision/labels.hpp"
#include "libs/vision/network.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace loom::vision {

struct image_filter_model {
  cnn_config net;
  std::vector<float> params;  // make_layout(net).total
  std::array<float, hand_features> hand_mean{}, hand_std{1.0f, 1.0f};
  std::vector<float> embed_mean, embed_std;  // embedding_dim(net) each: over the training set
};

// 2x2 average pooling of the last block, (2, 2, C4) -> 4*C4 values: the
// layout of the image survives (a global pool alone maps most pictures of
// the same class close together).
int embedding_dim(const cnn_config& net);

struct filter_options {
  cnn_config net;
  int epochs = 6;             // with 500+ images per class: held-out accuracy stops improving after ~5
  int batch = 32;             // 32: a smooth gradient at a few ms per step on 2 cores
  float lr = 3e-3f;           // AdamW peak; cosine down to lr / 20, warm-up half an epoch
  float weight_decay = 1e-4f;  // on weights, not biases; the data are plentiful, decay barely matters
  float clip = 5.0f;          // global-norm clip: only the first steps' spikes ever reach it
  bool flip = true;           // left-right mirroring: no class depends on handedness
  std::uint64_t seed = 1;     // initial weights, batch order, flips
  std::function<void(int epoch, float mean_loss, float train_accuracy)> on_epoch;  // optional progress
};

// Trains from scratch. invalid_argument for bad options, an empty set or an
// empty image (named by index).
result<image_filter_model> train_image_filter(const filter_options& opt, std::span<const labelled_image> train);

// The built-in generator (generate.hpp), per_class examples of each label from data_seed, then train.
result<image_filter_model> train_image_filter_generated(const filter_options& opt, int per_class,
                                                        std::uint64_t data_seed);

// A directory with one subdirectory per label (ok/, blank/, blurred/,
// corrupted/, mostly_text/), any image media::decode() reads inside, sorted
// by path. Files decode refuses are skipped and counted; other subdirectory
// names are an invalid_argument (a typo would silently drop a class).
struct labelled_dir {
  std::vector<labelled_image> images;
  int skipped = 0;
};
result<labelled_dir> load_labelled_dir(const std::string& dir, const media::limits& lim = {});
result<image_filter_model> train_image_filter_from_dir(const filter_options& opt, const std::string& dir);

struct classification {
  image_label label = image_label::ok;
  std::array<float, num_labels> probabilities{};  // softmax, sums to 1
};

// REQUIRES: model trained or loaded (params sized for model.net); img non-empty.
classification classify(const image_filter_model& model, const media::image& img);
// The same over many images, batched (faster per image).
std::vector<classification> classify_all(const image_filter_model& model, std::span<const media::image> imgs);

// L2-normalised embedding_dim(model.net) values, standardised per dimension
// with the training-set statistics first. Cosine similarity = dot product.
std::vector<float> embed(const image_filter_model& model, const media::image& img);
// The same for the image and its left-right mirror, summed, then
// L2-normalised: an image and its mirror embed (nearly) alike, which pHash
// cannot see (its DCT signs flip), so the import's semantic dedup uses this.
// Two forward passes, batched as one.
std::vector<float> embed_mirror_invariant(const image_filter_model& model, const media::image& img);

// Confusion counts: counts[truth][predicted].
struct confusion {
  std::array<std::array<int, num_labels>, num_labels> counts{};
  int total() const;
  double accuracy() const;
  std::string to_string() const;  // a table with a header row, one row per true label
};
confusion evaluate(const image_filter_model& model, std::span<const labelled_image> set);

// One model file: magic, version, config, standardisation statistics,
// weights, SHA-256 of all that. save() writes atomically. load() refuses a
// foreign file (invalid_argument) and a truncated, extended or damaged one
// (corruption), naming the path and the fault.
status save(const image_filter_model& model, const std::string& path);
result<image_filter_model> load(const std::string& path);

}  // namespace loom::vision
