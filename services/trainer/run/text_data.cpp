#include "services/trainer/run/text_data.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/bpe.hpp"

namespace loom::trainer {

result<std::string> prepare_text_dataset(const std::string& text_path, const std::string& cache_dir) {
  auto text = files::read_file(text_path);
  if (!text) return make_error(text.code(), "data.text " + text_path + ": " + text.err().message);
  const std::string stamp_path = cache_dir + "/source.sha256";
  const std::string digest = crypto::sha256_hex(*text) + "  " + text_path + "\n";
  if (auto stamp = files::read_file(stamp_path); stamp && *stamp == digest && shards::read_manifest(cache_dir))
    return cache_dir;

  auto bpe = tokenizer::bpe::load_gpt2();
  if (!bpe) return bpe.err();
  std::vector<std::uint32_t> ids{gpt2_eot};
  bpe->encode_into(*text, ids);
  shards::writer_options opt;
  opt.dir = cache_dir;
  auto w = shards::shard_writer::create(opt);
  if (!w) return w.err();
  if (auto st = w->append(ids); !st) return st.err();
  if (auto m = w->finish(); !m) return m.err();
  if (auto st = files::write_atomic(stamp_path, digest); !st) return st.err();
  return cache_dir;
}

}  // namespace loom::trainer
