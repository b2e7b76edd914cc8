#include "services/trainer/check/held_out.hpp"

#include "libs/files/confine.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/engine/model.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::modelcheck {

namespace {

// The last tail_bytes of the regular file open on `fd` (closed here).
result<std::string> tail_of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // a device or a pipe may never end
    ::close(fd);
    return make_error(errc::invalid_argument, "held-out text " + path + " is not a regular file");
  }
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t from = size > tail_bytes ? size - tail_bytes : 0;
  std::string text(size - from, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(from + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != text.size()) return make_error(errc::internal, "held-out text " + path + ": read failed");
  if (from > 0) {  // start at a line: not inside a word or a UTF-8 sequence
    const auto nl = text.find('\n');
    if (nl != std::string::npos) text.erase(0, nl + 1);
  }
  return text;
}

}  // namespace

result<held_out_tokens> tokens_of_text_tail(const std::string& path, const std::string& tokenizer_name,
                                            const std::vector<std::string>& roots) {
  int fd = -1;
  if (!roots.empty()) {
    auto opened = files::open_confined(roots, path, O_RDONLY | O_NONBLOCK);  // a FIFO must not block the open
    if (!opened) {
      if (opened.code() == errc::permission_denied) return make_error(errc::permission_denied, "held-out text: " + opened.err().message);
      return make_error(opened.code(), "held-out text " + path + ": " + opened.err().message);
    }
    fd = *opened;
  } else {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return make_error(errc::not_found, "held-out text " + path + " is not there");
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return make_error(errc::not_found, "held-out text " + path + " cannot be opened");
  }
  const std::uint64_t size_before = [&] {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  }();
  auto text = tail_of(fd, path);
  if (!text) return text.err();
  auto bpe = tokenizer_name == "gpt2" || tokenizer_name.empty() ? tokenizer::bpe::load_gpt2()
                                                                : tokenizer::load_hf_json(tokenizer_name);
  if (!bpe) return make_error(bpe.code(), "tokenizer " + tokenizer_name + ": " + bpe.err().message);
  held_out_tokens out;
  bpe->encode_into(*text, out.ids);
  out.source = (size_before > tail_bytes ? "the last " + std::to_string(text->size() / 1024) + " KiB of " : std::string()) + path;
  return out;
}

result<held_out_tokens> tokens_of_shards_tail(const std::string& dir, std::uint64_t count) {
  auto d = shards::dataset::open(dir, shards::verify::lazy);
  if (!d) return d.err();
  const std::uint64_t n = std::min(count, d->token_count());
  held_out_tokens out;
  out.ids.resize(n);
  if (auto st = d->read(d->token_count() - n, out.ids); !st) return st.err();
  out.source = "the last " + std::to_string(n) + " tokens of " + dir;
  return out;
}

result<scored> mean_loss(const model::gpt2_config& cfg, std::span<const float> params,
                         std::span<const std::uint32_t> ids, int seq_len, const std::atomic<bool>* stop) {
  if (ids.size() < 2) return make_error(errc::invalid_argument, "fewer than 2 held-out tokens");
  const int T = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::min(seq_len, cfg.max_seq_len)),
                                                       ids.size() - 1));
  const std::size_t cap = std::max<std::size_t>(1, std::min<std::size_t>(max_windows, max_scored_tokens / T));
  const int B = static_cast<int>(std::min<std::size_t>(cap, (ids.size() - 1) / static_cast<std::size_t>(T)));
  const std::size_t first = ids.size() - (static_cast<std::size_t>(B) * T + 1);  // the last B*T+1 tokens
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (ids[first + i] >= static_cast<std::uint32_t>(cfg.vocab) || ids[first + i + 1] >= static_cast<std::uint32_t>(cfg.vocab))
      return make_error(errc::invalid_argument, "held-out token id " +
                                                    std::to_string(std::max(ids[first + i], ids[first + i + 1])) +
                                                    " is outside the model's vocabulary of " + std::to_string(cfg.vocab));
    inputs[i] = static_cast<std::int32_t>(ids[first + i]);
    targets[i] = static_cast<std::int32_t>(ids[first + i + 1]);
  }
  auto m = engine::gpt2::create(cfg, 1, T);  // one window at a time: memory of one, not B
  if (!m) return m.err();
  std::memcpy(m->params().data(), params.data(), params.size() * sizeof(float));
  double sum = 0;
  for (int b = 0; b < B; ++b) {
    if (stop && stop->load()) return make_error(errc::unavailable, "stopped after " + std::to_string(b) + " windows");
    const std::size_t at = static_cast<std::size_t>(b) * T;
    auto loss = m->forward(std::span(inputs).subspan(at, T), std::span(targets).subspan(at, T));
    if (!loss) return loss.err();
    sum += static_cast<double>(*loss);
  }
  return scored{sum / B, static_cast<std::size_t>(B), inputs.size()};
}

}  // namespace loom::modelcheck
