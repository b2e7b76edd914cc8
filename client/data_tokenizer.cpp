// `loom data train-tokenizer --vocab-size N PATH [--out F] [--min-frequency F] [--json]`:
// learns a GPT-2-style byte-level BPE (libs/tokenizer/train) from a text file,
// or from every regular file under a directory (recursively, in path order),
// read 4 MB at a time, and writes it as a Hugging Face tokenizer.json
// (atomically; default ./tokenizer.json) that `loom-trainer` takes as
// data.tokenizer. Offline: no service; the data dir (--data-dir, $LOOM_HOME)
// only bounds where the output may go.
//   --vocab-size N     tokens in all: 256 bytes + merges + <|endoftext|> (last id); 257..2^20
//   --min-frequency F  stop early when no pair occurs F times (default 2)
//   --json             one line: the summary's numbers
// The summary reads the written file back and encodes the input with it:
// bytes per token is the real compression on the training text.
//   --force            replace an existing --out file
// PATH must be a regular file or a directory: a device or a pipe (/dev/zero)
// may never end, so it is refused instead of read forever. --out is checked
// before anything is read (layout::check_output): never one of the files it
// reads, never inside a data dir's keys/, tokens, store or job outputs (this
// command's data dir or any other), an existing file only with --force.
// Exit codes: 0 ok, 1 unreadable, empty, endless or unwritable input/output,
// an --out that exists or is an input, 2 usage, 3 an --out in a data dir's private part.
#include "client/cli.hpp"
#include "client/input.hpp"

#include "libs/layout/layout.hpp"

#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/bpe_train.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace loom::cli {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t read_block = 4 << 20;  // bytes per read: streams any input size in bounded memory

int data_error(const context& c, const error& e) {
  (void)fail(c, e);
  return error_exit;  // a file problem, whatever its errc (as `loom tokenize`)
}

status count_file(const std::string& path, tokenizer::piece_counts& counts, std::string& buf) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(errc::not_found, "cannot read " + path + ": " + std::strerror(errno));
  buf.resize(read_block);
  for (;;) {
    const std::size_t n = std::fread(buf.data(), 1, buf.size(), f);
    counts.feed(std::string_view(buf.data(), n));
    if (n < buf.size()) break;
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return make_error(errc::internal, "reading " + path + " failed");
  counts.end_document();
  return ok_status();
}

// Tokens of the whole input under `b`: every distinct piece encoded once, times its count.
std::uint64_t input_tokens(const tokenizer::bpe& b, const tokenizer::piece_counts& counts) {
  std::uint64_t total = 0;
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < counts.distinct(); ++i) {
    ids.clear();
    b.encode_into(counts.piece(i), ids);
    total += ids.size() * counts.count(i);
  }
  return total;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int cmd_data_train_tokenizer(context& c) {
  // The table checked --vocab-size (required, min_trained_vocab..max_trained_vocab) and --min-frequency (>= 1).
  const auto vocab_size = c.a.number("vocab-size");
  if (c.a.positional.size() != 3 || !vocab_size) return usage(usage_line(*c.a.command));
  tokenizer::train_options o;
  o.vocab_size = *vocab_size;
  o.min_frequency = c.a.number("min-frequency").value_or(o.min_frequency);
  const std::string path = c.a.positional[2];
  const std::string out = c.a.get_or("out", "tokenizer.json");

  const auto t0 = clock_type::now();
  auto files = input_files(path);
  if (!files) return data_error(c, files.err());
  loom::files::output_rules rules;
  rules.force = c.a.flag("force");
  rules.inputs = *files;
  rules.inputs.push_back(path);
  if (auto st = layout::check_output(c.paths, out, rules); !st) return fail(c, st.err());
  tokenizer::piece_counts counts;
  std::string buf;
  for (const auto& f : *files)
    if (auto st = count_file(f, counts, buf); !st) return data_error(c, st.err());
  if (counts.total_bytes() == 0)
    return data_error(c, make_error(errc::invalid_argument, "no text to train on in " + path +
                                                                 (files->empty() ? " (no files)" : " (empty)")));
  const double count_s = seconds_since(t0);

  const auto t1 = clock_type::now();
  auto trained = tokenizer::train_bpe(counts, o);
  if (!trained) return data_error(c, trained.err());
  const double train_s = seconds_since(t1);
  if (auto st = tokenizer::write_hf_json(out, tokenizer::spec_of(*trained)); !st)
    return data_error(c, make_error(st.code(), "cannot write " + out + ": " + st.err().message));
  const double total_s = seconds_since(t0);

  // Read back what was written: proves the file loads, and measures it.
  auto enc = tokenizer::load_hf_json(out);
  if (!enc) return data_error(c, make_error(errc::internal, "the written tokenizer does not load: " + enc.err().message));
  const std::uint64_t tokens = input_tokens(*enc, counts);
  const double bytes = static_cast<double>(counts.total_bytes());
  double gpt2_bpt = 0;
  if (auto g = tokenizer::bpe::load_gpt2())  // a yardstick when the vocabulary is installed
    gpt2_bpt = bytes / static_cast<double>(std::max<std::uint64_t>(1, input_tokens(*g, counts)));
  const double bpt = bytes / static_cast<double>(std::max<std::uint64_t>(1, tokens));
  const std::size_t vocab = trained->vocab_size();

  std::string text;
  if (c.json) {
    nlohmann::json j{{"out", out},
                     {"vocab_size", vocab},
                     {"merges", trained->merges.size()},
                     {"end_of_text_id", vocab - 1},
                     {"stopped_early", trained->stopped_early},
                     {"input_bytes", counts.total_bytes()},
                     {"input_mb", bytes / 1e6},
                     {"files", files->size()},
                     {"pieces", counts.total_pieces()},
                     {"distinct_pieces", counts.distinct()},
                     {"tokens", tokens},
                     {"bytes_per_token", bpt},
                     {"gpt2_bytes_per_token", gpt2_bpt > 0 ? nlohmann::json(gpt2_bpt) : nlohmann::json()},
                     {"count_seconds", count_s},
                     {"train_seconds", train_s},
                     {"seconds", total_s}};
    text = json_text(j) + "\n";
  } else {
    char line[512];
    std::snprintf(line, sizeof line,
                  "wrote %s: vocab %zu (256 bytes + %zu merges + <|endoftext|> = %zu)\n"
                  "input: %.2f MB in %zu file%s, %llu pieces (%zu distinct), split in %.2f s\n"
                  "trained in %.2f s, %.2f s in all; %.3f bytes/token on the input (%llu tokens)",
                  printable(out).c_str(), vocab, trained->merges.size(), vocab - 1, bytes / 1e6, files->size(),
                  files->size() == 1 ? "" : "s", static_cast<unsigned long long>(counts.total_pieces()),
                  counts.distinct(), count_s, train_s, total_s, bpt, static_cast<unsigned long long>(tokens));
    text = line;
    if (gpt2_bpt > 0) {
      std::snprintf(line, sizeof line, ", GPT-2: %.3f", gpt2_bpt);
      text += line;
    }
    text += "\n";
    if (trained->stopped_early)
      text += "note: stopped at " + std::to_string(vocab) + " of " + std::to_string(o.vocab_size) +
              " tokens: no pair left that occurs --min-frequency " + std::to_string(o.min_frequency) + " times\n";
  }
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    return data_error(c, make_error(errc::internal, "writing to stdout failed"));
  return ok_exit;
}

}  // namespace loom::cli
