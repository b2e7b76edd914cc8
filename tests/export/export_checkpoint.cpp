// export_checkpoint: a trained checkpoint exported as a Hugging Face directory
// and a GGUF file without the services, for scripts/check-export's test
// (check_export_test.py): `loom model export` writes the same files through
// the same libs/export calls, after the registry's checks. GPT-2's tokenizer.
// A test tool, one thread; exits 1 with a message on any error.
//
//   usage: export_checkpoint CHECKPOINT_DIR DATA_DIR HF_DIR GGUF_FILE f32|f16|q8_0
// DATA_DIR holds keys/checkpoint.key, the key that signed the checkpoint.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "libs/atrest/object.hpp"
#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/hf_dir.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/engine/model.hpp"
#include "services/trainer/run/snapshot_io.hpp"

using namespace loom;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "export_checkpoint: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: export_checkpoint CHECKPOINT_DIR DATA_DIR HF_DIR GGUF_FILE f32|f16|q8_0\n");
    return 2;
  }
  const std::string type_name = argv[5];
  const auto type = type_name == "f32"    ? exporter::gguf_type::f32
                    : type_name == "f16"  ? exporter::gguf_type::f16
                    : type_name == "q8_0" ? exporter::gguf_type::q8_0
                                          : (die("type must be f32, f16 or q8_0, not " + type_name), exporter::gguf_type::f32);
  // The data dir's keys at rest: its trainer sealed the snapshot (libs/atrest).
  atrest::kek_options ko;
  ko.create = false;
  if (auto keys = atrest::kek_store::open(std::string(argv[2]) + "/keys/atrest", ko, std::chrono::system_clock::now()))
    atrest::set_process_keys(std::move(*keys));
  auto key = trainer::existing_checkpoint_key(argv[2]);
  if (!key) die(key.err().to_string());
  auto snap = trainer::open_snapshot(argv[1], *key);
  if (!snap) die(snap.err().to_string());
  auto m = engine::gpt2::create(snap->model, 1, 1);
  if (!m) die(m.err().to_string());
  if (auto st = trainer::load_params(*snap, *m); !st) die(st.err().to_string());
  auto bpe = tokenizer::bpe::load_gpt2();
  if (!bpe) die(bpe.err().to_string() + " (scripts/install-vocab installs GPT-2's vocabulary)");
  auto spec = tokenizer::spec_from_ranks(*bpe);
  if (!spec) die(spec.err().to_string());
  if (auto st = exporter::write_hf_dir(snap->model, m->params(), *spec, argv[3]); !st) die(st.err().to_string());
  if (auto st = exporter::write_gguf(snap->model, m->params(), *spec, type, argv[4]); !st) die(st.err().to_string());
  std::printf("export_checkpoint: %s (step %llu) -> %s and %s (%s)\n", snap->where.dir.c_str(),
              static_cast<unsigned long long>(snap->where.step), argv[3], argv[4], type_name.c_str());
  return 0;
}
