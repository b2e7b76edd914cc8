// align_dump: runs the alignment losses over the GPT-2 engine on small,
// fixed-seed cases and writes <dir>/<case>.safetensors for
// align_reference.py to recompute in float64 PyTorch:
//   dpo, ipo  policy and reference weights, a pair batch (inputs, targets,
//             response mask), the policy's per-token log-probs, both models'
//             response log-prob sums, the loss, dL/dπ per row and every
//             policy gradient (dpo_driver::run with backward).
//   bt        backbone and reward-head weights, a pair batch, the rewards at
//             each row's last token, the Bradley–Terry loss, dL/dr and every
//             backbone and head gradient (reward_driver::run with backward).
// A test tool, one thread; exits 1 with a message on any error.
//
//   usage: align_dump OUT_DIR [--perturb TENSOR]
// --perturb moves the middle element of the named tensor by 1e-4 of the
// tensor's largest magnitude (ten times the parity bound) in every case that
// has it: the negative control.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "libs/ckpt/safetensors.hpp"
#include "services/trainer/align/dpo.hpp"
#include "services/trainer/align/reward_model.hpp"

using namespace loom;
using namespace loom::align;

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "align_dump: %s\n", what.c_str());
  std::exit(1);
}

struct entry {
  std::string name;
  ckpt::dtype type;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};

struct dump {
  std::vector<entry> entries;
  template <class T>
  void add(std::string name, std::vector<std::uint64_t> shape, std::span<const T> v) {
    static_assert(sizeof(T) == 4);
    entry e{std::move(name), std::is_same_v<T, float> ? ckpt::dtype::F32 : ckpt::dtype::I32, std::move(shape),
            std::vector<std::byte>(v.size() * 4)};
    std::memcpy(e.bytes.data(), v.data(), e.bytes.size());
    entries.push_back(std::move(e));
  }
  void scalar(std::string name, double x) {
    const float f = float(x);
    add<float>(std::move(name), {}, std::span(&f, 1));
  }
  void tensors(const std::string& prefix, const engine::gpt2& m, std::span<const float> buf) {
    for (int i = 0; i < model::num_tensors; ++i) {
      const auto id = static_cast<model::tensor_id>(i);
      add<float>(prefix + std::string(model::tensor_name(id)), model::tensor_shape(m.config(), id),
                 buf.subspan(m.layout().offset(id), m.layout().size(id)));
    }
  }
  bool perturb(const std::string& name) {
    for (entry& e : entries) {
      if (e.name != name || e.type != ckpt::dtype::F32) continue;
      std::vector<float> v(e.bytes.size() / 4);
      std::memcpy(v.data(), e.bytes.data(), e.bytes.size());
      float mx = 0;
      for (float x : v) mx = std::max(mx, std::fabs(x));
      v[v.size() / 2] += 1e-4f * mx;
      std::memcpy(e.bytes.data(), v.data(), e.bytes.size());
      return true;
    }
    return false;
  }
  void write(const std::string& path, const ckpt::metadata& meta) const {
    std::vector<ckpt::tensor_view> views;
    for (const entry& e : entries) views.push_back({e.name, e.type, e.shape, e.bytes.data(), e.bytes.size()});
    if (auto st = ckpt::write_safetensors(path, views, meta); !st) die(st.err().to_string());
  }
};

// After init_random(): matrices ×5, LayerNorm weights 1 + N(0, 0.2), biases
// N(0, 0.1), so every tensor counts (as engine_dump's spread_weights).
void spread(engine::gpt2& m, std::mt19937& rng) {
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto id = static_cast<model::tensor_id>(i);
    float* t = m.params().data() + m.layout().offset(id);
    std::size_t n = m.layout().size(id);
    if (id == model::tensor_id::wte) n = std::size_t(m.config().vocab) * m.config().channels;
    const bool lnw = id == model::tensor_id::ln1w || id == model::tensor_id::ln2w || id == model::tensor_id::lnfw;
    for (std::size_t k = 0; k < n; ++k) {
      if (model::tensor_decays(id)) t[k] *= 5.0f;
      else t[k] += (lnw ? 0.2f : 0.1f) * n01(rng);
    }
  }
}

engine::gpt2 make_model(const model::gpt2_config& cfg, int B, int T, std::uint64_t seed, std::mt19937& rng) {
  auto m = engine::gpt2::create(cfg, B, T);
  if (!m) die(m.err().to_string());
  m->init_random(seed);
  spread(*m, rng);
  return std::move(*m);
}

// P pairs of random tokens: prompts of 2–5 tokens, responses of 1..T−prompt.
pair_batch random_pairs(int P, int T, int V, std::mt19937& rng) {
  std::vector<pair_tokens> pairs(static_cast<std::size_t>(P));
  auto toks = [&](int n) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = std::int32_t(rng() % unsigned(V));
    return v;
  };
  for (auto& p : pairs) {
    const int pn = 2 + int(rng() % 4);
    p.prompt = toks(pn);
    p.chosen = toks(1 + int(rng() % unsigned(T - pn)));
    p.rejected = toks(1 + int(rng() % unsigned(T - pn)));
  }
  auto b = make_pair_batch(pairs, T);
  if (!b) die(b.err().to_string());
  return std::move(*b);
}

void add_batch(dump& d, const pair_batch& b) {
  const std::vector<std::uint64_t> bt{std::uint64_t(2 * b.pairs), std::uint64_t(b.seq_len)};
  d.add<std::int32_t>("inputs", bt, b.inputs);
  d.add<std::int32_t>("targets", bt, b.targets);
  d.add<float>("mask", bt, b.mask);
  d.add<std::int32_t>("last", {bt[0]}, b.last);
}

ckpt::metadata meta_of(const model::gpt2_config& c, const std::string& kind, int P, int T) {
  auto s = [](auto x) { return std::to_string(x); };
  return {{"kind", kind}, {"layers", s(c.layers)}, {"heads", s(c.heads)}, {"channels", s(c.channels)},
          {"max_seq_len", s(c.max_seq_len)}, {"vocab", s(c.vocab)}, {"padded_vocab", s(c.padded_vocab)},
          {"pairs", s(P)}, {"seq_len", s(T)}};
}

dump preference_case(const model::gpt2_config& cfg, int P, int T, dpo_options o, std::uint64_t seed,
                     ckpt::metadata& meta) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  engine::gpt2 pi = make_model(cfg, 2 * P, T, seed, rng);
  engine::gpt2 ref = make_model(cfg, 2 * P, T, seed + 1, rng);
  const pair_batch b = random_pairs(P, T, cfg.vocab, rng);
  dump d;
  d.tensors("", pi, pi.params());
  d.tensors("ref.", ref, ref.params());
  add_batch(d, b);
  dpo_driver drv(pi, ref, o);
  auto m = drv.run(b, true, 1.0f, false);
  if (!m) die(m.err().to_string());
  // The driver's intermediate values, recomputed the same way for the dump.
  const std::size_t rows = std::size_t(2 * P);
  std::vector<float> tok(rows * T), pi_seq(rows), ref_seq(rows), dseq(rows), scratch;
  pi.token_logprobs(tok);  // backward keeps them
  sequence_logprobs(pi, b, scratch, pi_seq);
  if (!ref.forward(b.inputs, b.targets)) die("reference forward");
  sequence_logprobs(ref, b, scratch, ref_seq);
  const dpo_stats s = dpo_loss(o, std::span(pi_seq).first(std::size_t(P)), std::span(pi_seq).subspan(std::size_t(P)),
                               std::span(ref_seq).first(std::size_t(P)), std::span(ref_seq).subspan(std::size_t(P)),
                               std::span(dseq).first(std::size_t(P)), std::span(dseq).subspan(std::size_t(P)));
  if (s.loss != m->pref.loss) die("the driver's loss differs from dpo_loss on its own inputs");
  d.add<float>("token_logprobs", {rows, std::uint64_t(T)}, tok);
  d.add<float>("pi_seq", {rows}, pi_seq);
  d.add<float>("ref_seq", {rows}, ref_seq);
  d.add<float>("d_seq", {rows}, dseq);
  d.scalar("loss", s.loss);
  d.scalar("accuracy", s.accuracy);
  d.scalar("reward_margin", s.reward_margin);
  d.tensors("grad.", pi, pi.grads());
  char beta[32];
  std::snprintf(beta, sizeof beta, "%.9g", o.beta);
  meta["beta"] = beta;
  std::printf("  loss %.6f accuracy %.3f margin %.4f\n", s.loss, s.accuracy, s.reward_margin);
  return d;
}

dump reward_case(const model::gpt2_config& cfg, int P, int T, std::uint64_t seed) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  engine::gpt2 m = make_model(cfg, 2 * P, T, seed, rng);
  reward_head head(cfg.channels);
  head.init(seed);
  head.params()[std::size_t(cfg.channels)] = 0.3f;
  const pair_batch b = random_pairs(P, T, cfg.vocab, rng);
  dump d;
  d.tensors("", m, m.params());
  d.add<float>("head.w", {std::uint64_t(cfg.channels)}, head.params().first(std::size_t(cfg.channels)));
  d.add<float>("head.b", {1}, head.params().subspan(std::size_t(cfg.channels)));
  add_batch(d, b);
  reward_driver drv(m, head);
  auto r = drv.score(b.inputs, b.last);
  if (!r) die(r.err().to_string());
  std::vector<float> dr(r->size());
  const std::size_t uP = std::size_t(P);
  const bt_stats s = bradley_terry(std::span(*r).first(uP), std::span(*r).subspan(uP), std::span(dr).first(uP),
                                   std::span(dr).subspan(uP));
  auto st = drv.run(b, true, 1.0f, false);
  if (!st) die(st.err().to_string());
  d.add<float>("rewards", {r->size()}, *r);
  d.add<float>("d_r", {dr.size()}, dr);
  d.scalar("loss", s.loss);
  d.scalar("accuracy", s.accuracy);
  d.scalar("margin", s.margin);
  d.tensors("grad.", m, m.grads());
  d.add<float>("grad.head.w", {std::uint64_t(cfg.channels)}, std::span<const float>(head.grads()).first(std::size_t(cfg.channels)));
  d.add<float>("grad.head.b", {1}, std::span<const float>(head.grads()).subspan(std::size_t(cfg.channels)));
  std::printf("  loss %.6f accuracy %.3f margin %.4f\n", s.loss, s.accuracy, s.margin);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--perturb")) {
    std::fprintf(stderr, "usage: align_dump OUT_DIR [--perturb TENSOR]\n");
    return 2;
  }
  const std::string dir = argv[1], perturbed = argc == 4 ? argv[3] : "";
  // T < maxT for dpo and bt, T = maxT for ipo; V < Vp everywhere.
  const model::gpt2_config small{2, 2, 32, 16, 97, 128}, wide{3, 4, 64, 16, 257, 320};
  int n_perturbed = 0;
  for (const char* name : {"dpo", "ipo", "bt"}) {
    const std::string c = name;
    std::printf("align_dump: case %s\n", name);
    ckpt::metadata meta;
    dump d;
    if (c == "dpo") {
      meta = meta_of(small, "dpo", 2, 12);
      d = preference_case(small, 2, 12, {0.5f, preference_loss::dpo}, 0xA11C0001, meta);
    } else if (c == "ipo") {
      meta = meta_of(wide, "ipo", 3, 16);
      d = preference_case(wide, 3, 16, {0.5f, preference_loss::ipo}, 0xA11C0002, meta);
    } else {
      meta = meta_of(small, "bt", 3, 10);
      d = reward_case(small, 3, 10, 0xA11C0003);
    }
    if (!perturbed.empty() && d.perturb(perturbed)) {
      meta["perturbed"] = perturbed;
      ++n_perturbed;
    }
    d.write(dir + "/" + c + ".safetensors", meta);
  }
  if (!perturbed.empty() && n_perturbed == 0) die("--perturb: no case has an F32 tensor " + perturbed);
  return 0;
}
