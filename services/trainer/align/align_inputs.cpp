#include "services/trainer/align/align_inputs.hpp"

#include "libs/atrest/object.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/trainer/align/pair_stream.hpp"
#include "services/trainer/align/synthetic_prefs.hpp"
#include "services/trainer/run/text_data.hpp"

#include <algorithm>
#include <memory>
#include <regex>

namespace loom::trainer {
namespace {

// The synthetic set's size: 512 training pairs, held-out ones by data.held_out.
constexpr int synthetic_train = 512;

result<std::vector<align::pair_batch>> batches_of(const std::vector<align::pair_tokens>& pairs, int P, int T) {
  std::vector<align::pair_batch> out;
  for (std::size_t at = 0; at + std::size_t(P) <= pairs.size(); at += std::size_t(P)) {
    auto b = align::make_pair_batch(std::span(pairs).subspan(at, std::size_t(P)), T);
    if (!b) return b.err();
    out.push_back(std::move(*b));
  }
  return out;
}

}  // namespace

result<align_inputs> load_align_inputs(const runspec::run_config& c) {
  align_inputs in;
  // The tokenizer: bytes, or a BPE (GPT-2 or data.tokenizer).
  align::encode_fn encode;
  std::shared_ptr<tokenizer::bpe> bpe;
  std::int32_t eot = -1;
  if (c.tokenizer == "bytes") {
    encode = align::encode_bytes;
    in.decode = [](std::span<const std::int32_t> ids) {
      std::string s;
      for (auto id : ids) s.push_back(static_cast<char>(id & 0xff));
      return s;
    };
  } else {
    auto b = load_run_tokenizer(c.tokenizer);
    if (!b) return b.err();
    bpe = std::make_shared<tokenizer::bpe>(std::move(*b));
    auto e = end_of_text_id(*bpe, c.tokenizer);
    if (!e) return e.err();
    eot = static_cast<std::int32_t>(*e);
    encode = [bpe](std::string_view s) {
      auto ids = bpe->encode(s);
      return std::vector<std::int32_t>(ids.begin(), ids.end());
    };
    in.decode = [bpe](std::span<const std::int32_t> ids) {
      std::vector<std::uint32_t> u;
      for (auto id : ids)
        if (id >= 0 && bpe->valid_id(std::uint32_t(id))) u.push_back(std::uint32_t(id));
      return bpe->decode(u);
    };
  }
  // The records and their rendering.
  std::vector<align::preference_record> train, held;
  align::render_options ro;
  if (c.synthetic_prefs) {
    align::synthetic_options so;
    so.train_pairs = synthetic_train;
    so.held_out_pairs = std::max(2 * c.batch, int(synthetic_train * c.held_out / (1 - c.held_out)));
    so.seed = c.seed;
    auto split = align::synthetic_preferences(so);
    train = std::move(split.train);
    held = std::move(split.held_out);
    ro = align::synthetic_render();  // "shout abc: ABC!\n"
    if (c.tokenizer != "bytes") ro.end_token = encode("\n").front();
    in.identity = crypto::sha256_hex("synthetic-prefs seed=" + std::to_string(c.seed) + " held=" +
                                     std::to_string(so.held_out_pairs));
  } else {
    auto text = atrest::read_object(c.prefs);  // plain, or a dataset's records sealed at rest
    if (!text) return make_error(text.code(), "data.prefs " + c.prefs + ": " + text.err().message);
    auto recs = align::preferences_from_jsonl(*text, c.prefs);
    if (!recs) return recs.err();
    std::tie(train, held) = align::split_held_out(*recs, c.held_out, c.seed);
    ro.end_token = c.tokenizer == "bytes" ? '\n' : eot;
    in.identity = crypto::sha256_hex(*text);
  }
  in.stop_token = ro.end_token;
  const std::string what = c.synthetic_prefs ? std::string("data.synthetic_prefs") : "data.prefs " + c.prefs;
  if (int(train.size()) < c.batch || int(held.size()) < c.batch)
    return make_error(errc::invalid_argument,
                      what + ": " + std::to_string(train.size()) + " training and " + std::to_string(held.size()) +
                          " held-out pairs (data.held_out " + std::to_string(c.held_out) +
                          "); each needs at least train.batch = " + std::to_string(c.batch));
  std::vector<align::pair_tokens> held_tokens;
  for (const auto& r : train) in.train.push_back(align::render_pair(r, encode, ro));
  for (const auto& r : held) held_tokens.push_back(align::render_pair(r, encode, ro));
  auto hb = batches_of(held_tokens, c.batch, c.seq_len);
  if (!hb) return make_error(hb.code(), what + ": " + hb.err().message);
  in.held_out = std::move(*hb);
  for (const auto& p : in.train) in.train_prompts.push_back(p.prompt);
  for (const auto& p : held_tokens) in.eval_prompts.push_back(p.prompt);
  return in;
}

align::reward_fn rule_reward(const runspec::align_settings& a, const align_inputs& in) {
  auto re = a.regex.empty() ? nullptr : std::make_shared<std::regex>(a.regex);
  return [a, re, decode = in.decode, stop = in.stop_token](const align::rollout_batch& b) -> result<std::vector<float>> {
    std::vector<float> out(std::size_t(b.rows));
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::span<const std::int32_t> ids(b.response[i]);
      if (!ids.empty() && ids.back() == stop) ids = ids.first(ids.size() - 1);
      const std::string text = decode(ids);
      double sum = 0;
      int parts = 0;
      if (!a.keywords.empty()) {
        int found = 0;
        for (const auto& k : a.keywords) found += text.find(k) != std::string::npos;
        sum += double(found) / double(a.keywords.size());
        ++parts;
      }
      if (a.min_len > 0 || a.max_len > 0) {
        const int n = int(text.size());
        sum += (n >= a.min_len && (a.max_len == 0 || n <= a.max_len)) ? 1.0 : 0.0;
        ++parts;
      }
      if (re) {
        sum += std::regex_match(text, *re) ? 1.0 : 0.0;
        ++parts;
      }
      out[i] = parts ? float(sum / parts) : 0.0f;
    }
    return out;
  };
}

}  // namespace loom::trainer
