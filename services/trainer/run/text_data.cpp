#include "services/trainer/run/text_data.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/bpe.hpp"

namespace loom::trainer {

result<std::string> cached_shards(const std::string& source, const std::string& what, const std::string& kind,
                                  const std::string& cache_dir,
                                  const std::function<status(const std::string& text)>& build) {
  auto text = files::read_file(source);
  if (!text) return make_error(text.code(), what + " " + source + ": " + text.err().message);
  const std::string stamp_path = cache_dir + "/source.sha256";
  const std::string digest = crypto::sha256_hex(*text) + "  " + (kind.empty() ? "" : kind + " ") + source + "\n";
  if (auto stamp = files::read_file(stamp_path); stamp && *stamp == digest && shards::read_manifest(cache_dir))
    return cache_dir;
  if (auto st = build(*text); !st) return st.err();
  if (auto st = files::write_atomic(stamp_path, digest); !st) return st.err();
  return cache_dir;
}

result<std::string> prepare_text_dataset(const std::string& text_path, const std::string& cache_dir) {
  return cached_shards(text_path, "data.text", "", cache_dir, [&](const std::string& text) -> status {
    auto bpe = tokenizer::bpe::load_gpt2();
    if (!bpe) return bpe.err();
    std::vector<std::uint32_t> ids{gpt2_eot};
    bpe->encode_into(text, ids);
    shards::writer_options opt;
    opt.dir = cache_dir;
    auto w = shards::shard_writer::create(opt);
    if (!w) return w.err();
    if (auto st = w->append(ids); !st) return st;
    if (auto m = w->finish(); !m) return m.err();
    return ok_status();
  });
}

}  // namespace loom::trainer
