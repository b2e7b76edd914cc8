#include "libs/ckpt/gpt2_checkpoint.hpp"

#include "libs/atrest/sealed.hpp"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <utility>

namespace loom::ckpt {
namespace {

namespace fs = std::filesystem;

std::string dims(const std::vector<std::uint64_t>& s) {
  std::string out;
  for (auto d : s) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

// The six shape fields in the order the metadata and messages name them.
template <class Config, class Fn>
void for_each_field(Config& c, Fn&& fn) {
  for (auto [k, p] : {std::pair{"layers", &c.layers}, {"heads", &c.heads}, {"channels", &c.channels},
                      {"max_seq_len", &c.max_seq_len}, {"vocab", &c.vocab}, {"padded_vocab", &c.padded_vocab}})
    fn(k, *p);
}

// Removes the snapshot writer's temp directory unless it was published
// (renamed away: the removal then finds nothing).
struct temp_cleanup {
  std::string dir;
  ~temp_cleanup() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

}  // namespace

metadata gpt2_metadata(const model::gpt2_config& c) {
  metadata m{{"format", "loom-gpt2"}};
  for_each_field(c, [&](const char* k, int v) { m[k] = std::to_string(v); });
  return m;
}

result<model::gpt2_config> gpt2_config_from(const metadata& m, const std::string& file) {
  model::gpt2_config c;
  status bad = ok_status();
  for_each_field(c, [&](const char* k, int& out) {
    if (!bad) return;
    auto it = m.find(k);
    if (it == m.end()) {
      bad = make_error(errc::corruption, file + ": metadata lacks \"" + k + "\"");
      return;
    }
    const std::string& v = it->second;
    long n = 0;  // digits only: no sign, no space, no suffix
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || v[0] < '0' || v[0] > '9' || ec != std::errc() || end != v.data() + v.size() || n < 1 ||
        n > gpt2_max_dim) {
      bad = make_error(errc::corruption, file + ": metadata \"" + k + "\" is \"" + v +
                                             "\", not a size in [1, " + std::to_string(gpt2_max_dim) + "]");
      return;
    }
    out = static_cast<int>(n);
  });
  if (!bad) return bad.err();
  if (auto st = c.validate(); !st) return make_error(errc::corruption, file + ": " + st.err().message);
  return c;
}

std::vector<tensor_view> gpt2_tensors(const model::gpt2_config& c, std::span<const float> theta) {
  const model::param_layout lay = model::make_param_layout(c);
  std::vector<tensor_view> out;
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto t = static_cast<model::tensor_id>(i);
    out.push_back({std::string(model::tensor_name(t)), dtype::F32, model::tensor_shape(c, t),
                   theta.data() + lay.offset(t), lay.size(t) * sizeof(float)});
  }
  return out;
}

status gpt2_copy_params(const safetensors_file& f, const model::gpt2_config& c, const std::string& file,
                        std::span<float> out) {
  const model::param_layout lay = model::make_param_layout(c);
  if (out.size() != lay.total)
    return make_error(errc::invalid_argument, file + ": " + std::to_string(out.size()) +
                                                  " parameters asked for, the model has " + std::to_string(lay.total));
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto id = static_cast<model::tensor_id>(i);
    const std::string name(model::tensor_name(id));
    const auto want = model::tensor_shape(c, id);
    const tensor_info* t = f.find(name);
    if (!t) return make_error(errc::corruption, file + ": no tensor \"" + name + "\"");
    if (t->type != dtype::F32 || t->shape != want)
      return make_error(errc::invalid_argument, file + ": tensor \"" + name + "\" is " +
                                                    std::string(to_string(t->type)) + "[" + dims(t->shape) +
                                                    "], the model needs F32[" + dims(want) + "]");
    std::memcpy(out.data() + lay.offset(id), t->data.data(), t->data.size());  // the data may be unaligned
  }
  return ok_status();
}

result<std::vector<float>> gpt2_flat_params(const safetensors_file& f, const model::gpt2_config& c,
                                            const std::string& file) {
  std::vector<float> out(model::make_param_layout(c).total);
  if (auto st = gpt2_copy_params(f, c, file, out); !st) return st.err();
  return out;
}

result<std::string> write_gpt2_snapshot(const std::string& root, std::uint64_t step, const gpt2_snapshot& s,
                                        std::string_view key, std::int64_t created_unix) {
  const std::size_t total = model::make_param_layout(s.config).total;
  if (s.params.size() != total)
    return make_error(errc::invalid_argument, "the parameters (" + std::to_string(s.params.size()) +
                                                  ") are not the model's (" + std::to_string(total) + ")");
  snapshot_writer w;
  if (auto st = w.begin(root, step); !st) return st.err();
  temp_cleanup cleanup{w.dir()};  // every failure below leaves no .tmp-step-* behind
  w.seal_with(s.seal, std::chrono::system_clock::time_point{} + std::chrono::seconds(created_unix));
  // Sealed: streamed through a sealed writer, so no plaintext reaches the disk.
  auto add = [&](const std::string& name, std::span<const tensor_view> tensors, const metadata& meta) -> status {
    const std::string path = w.dir() + "/" + name;
    if (s.seal) {  // streamed into the sealed file: never whole in memory, sealed or plain
      auto sw = atrest::sealed_writer::create(path, *s.seal, w.sealing_now(), 0644);
      if (!sw) return sw.err();
      if (auto st = stream_safetensors(tensors, meta, path, [&](std::string_view b) { return (*sw)->append(b); }); !st)
        return st;
      auto facts = (*sw)->finish();
      if (!facts) return facts.err();
      return w.add_sealed(name, facts->sha256_hex, facts->bytes);
    }
    if (auto st = write_safetensors(path, tensors, meta); !st) return st;
    return w.add_existing(name);
  };
  if (auto st = add(gpt2_model_file, gpt2_tensors(s.config, s.params), gpt2_metadata(s.config)); !st) return st.err();
  for (const extra_file& e : s.extras)
    if (auto st = add(e.name, e.tensors, e.meta); !st) return st.err();
  if (auto st = w.add_file(gpt2_state_file, s.trainer_state); !st) return st.err();
  return w.publish(key, created_unix);
}

result<loaded_snapshot> open_snapshot_at(const std::string& path, std::string_view key) {
  const fs::path p = fs::path(path).lexically_normal();
  const std::string base = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
  const auto step = parse_step_dir(base);
  std::error_code ec;
  if (!step || !fs::exists(p / "MANIFEST.json", ec)) return load_latest(path, key);
  loaded_snapshot out;
  auto problems = verify_snapshot(p.string(), *step, key, &out);
  if (problems.empty()) return out;
  std::string all;
  for (auto& s : problems) all += (all.empty() ? "" : "; ") + s;
  return make_error(errc::corruption, all);
}

result<safetensors_file> read_gpt2_model(const loaded_snapshot& s) {
  return read_safetensors(s.dir + "/" + gpt2_model_file);
}

result<std::vector<float>> read_gpt2_params(const std::string& path, std::string_view key,
                                            const model::gpt2_config& c) {
  auto snap = open_snapshot_at(path, key);
  if (!snap) return snap.err();
  auto file = read_gpt2_model(*snap);
  if (!file) return file.err();
  return gpt2_flat_params(*file, c, snap->dir + "/" + gpt2_model_file);
}

}  // namespace loom::ckpt
