#include "services/trainer/run/text_data.hpp"

#include "libs/atrest/object.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"

namespace loom::trainer {

result<std::string> cached_shards(const std::string& source, const std::string& what, const std::string& kind,
                                  const std::string& cache_dir,
                                  const std::function<status(const std::string& text)>& build) {
  auto text = atrest::read_object(source);  // a dataset's records.jsonl is sealed at rest
  if (!text) return make_error(text.code(), what + " " + source + ": " + text.err().message);
  const std::string stamp_path = cache_dir + "/source.sha256";
  const std::string digest = crypto::sha256_hex(*text) + "  " + (kind.empty() ? "" : kind + " ") + source + "\n";
  if (auto stamp = files::read_file(stamp_path); stamp && *stamp == digest && shards::read_manifest(cache_dir))
    return cache_dir;
  if (auto st = build(*text); !st) return st.err();
  if (auto st = files::write_atomic(stamp_path, digest); !st) return st.err();
  return cache_dir;
}

result<tokenizer::bpe> load_run_tokenizer(const std::string& path) {
  if (path.empty()) return tokenizer::bpe::load_gpt2();
  auto b = tokenizer::load_hf_json(path);
  if (!b) return make_error(b.code(), "data.tokenizer: " + b.err().message);
  return b;
}

result<std::uint32_t> end_of_text_id(const tokenizer::bpe& b, const std::string& path) {
  if (auto id = b.special_id(tokenizer::end_of_text)) return *id;
  return make_error(errc::invalid_argument, "data.tokenizer " + (path.empty() ? std::string("GPT-2") : path) +
                                                " has no special token " + std::string(tokenizer::end_of_text) +
                                                " (documents are separated by it)");
}

result<std::string> tokenizer_stamp(const std::string& path) {
  if (path.empty()) return std::string();
  auto text = files::read_file(path);
  if (!text) return make_error(text.code(), "data.tokenizer " + path + ": " + text.err().message);
  return "tokenizer " + crypto::sha256_hex(*text);
}

result<std::string> prepare_text_dataset(const std::string& text_path, const std::string& cache_dir,
                                         const std::string& tokenizer_path) {
  if (tokenizer_path == "bytes")  // one token per byte (vocab 256): the tiny byte-level models
    return cached_shards(text_path, "data.text", "bytes", cache_dir, [&](const std::string& text) -> status {
      std::vector<std::uint32_t> ids(text.begin(), text.end());
      for (auto& id : ids) id &= 0xffu;  // char may be signed
      shards::writer_options opt;
      opt.dir = cache_dir;
      const auto seal = atrest::sealing_keys();  // sealed at rest unless LOOM_AT_REST=off
      opt.seal = seal.get();
      auto w = shards::shard_writer::create(opt);
      if (!w) return w.err();
      if (auto st = w->append(ids); !st) return st;
      if (auto m = w->finish(); !m) return m.err();
      return ok_status();
    });
  auto stamp = tokenizer_stamp(tokenizer_path);
  if (!stamp) return stamp.err();
  return cached_shards(text_path, "data.text", *stamp, cache_dir, [&](const std::string& text) -> status {
    auto bpe = load_run_tokenizer(tokenizer_path);
    if (!bpe) return bpe.err();
    auto eot = end_of_text_id(*bpe, tokenizer_path);
    if (!eot) return eot.err();
    std::vector<std::uint32_t> ids{*eot};
    bpe->encode_into(text, ids);
    shards::writer_options opt;
    opt.dir = cache_dir;
    const auto seal = atrest::sealing_keys();  // sealed at rest unless LOOM_AT_REST=off
    opt.seal = seal.get();
    auto w = shards::shard_writer::create(opt);
    if (!w) return w.err();
    if (auto st = w->append(ids); !st) return st;
    if (auto m = w->finish(); !m) return m.err();
    return ok_status();
  });
}

}  // namespace loom::trainer
