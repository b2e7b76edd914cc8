// engine_dump: runs the GPT-2 engine (libs/engine) on a few small,
// fixed-seed cases and writes one safetensors file per case, <dir>/<case>.safetensors,
// for torch_reference.py to recompute in PyTorch. Each file holds the initial
// weights, the tokens and loss weights, the logits, loss and every gradient of
// one forward/backward, and, for the cases that train, each train_step's
// gradients, loss, grad norm, learning rate and the parameters after AdamW.
// A test tool, driven from one thread; exits 1 with a message on any error.
//
//   usage: engine_dump OUT_DIR [--perturb TENSOR]
// --perturb adds 2e-4 (twice the parity bound) to one element of the named
// dumped tensor (e.g. grad.qkvw) in every case that has it (named in that
// file's metadata as "perturbed"): the negative control that proves the
// PyTorch comparison can fail.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "libs/ckpt/safetensors.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"

using namespace loom;
using namespace loom::engine;

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

// What the negative control adds: twice torch_reference.py's 1e-4 bound.
constexpr float perturb_delta = 2e-4f;

struct parity_case {
  const char* name;
  model::gpt2_config cfg;
  int batch, seq_len;
  // GPT-2's init_random() alone leaves biases 0, LayerNorm weights 1 and
  // pre-GELU values small (where tanh-GELU and erf-GELU agree to 1e-4), so a
  // forward that skipped a bias would still match. spread_weights adds noise to
  // every tensor and scales the matrices ×5 to make all of them count.
  bool spread_weights;
  bool weighted;      // per-token loss weights in {0, 0.5, 1, 1.5}; else none (all 1)
  int micro_batches;  // micro-batches per train_step
  int steps;          // train_step calls after the forward/backward check; 0 = none
  std::uint64_t seed;
};

// T < maxT in the first two (wpe rows >= T get no gradient), T = maxT in the
// third; V < Vp everywhere, so the padded vocabulary columns are exercised.
constexpr parity_case cases[] = {
    {"small", {2, 2, 32, 16, 97, 128}, 2, 8, false, false, 1, 0, 0x5EED0001},
    {"masked_adamw", {2, 2, 32, 16, 97, 128}, 2, 8, false, true, 2, 3, 0x5EED0002},
    {"wide_spread", {3, 4, 64, 16, 257, 320}, 3, 16, true, true, 1, 0, 0x5EED0003},
};

// The optimiser and schedule of the training cases. max_lr is larger than a
// real run's so that weight decay moves the parameters well above fp32 noise.
constexpr adamw_config opt_cfg{0.9f, 0.95f, 1e-8f, 0.1f};
constexpr lr_schedule schedule{2e-2f, 2e-3f, 1, 3};
// Between the grad norms of the steps (about 2.5, 2.4, 4.4 here): the last
// step is clipped, the first two are not, so both branches are checked.
constexpr float grad_clip = 3.0f;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "engine_dump: %s\n", what.c_str());
  std::exit(1);
}

// Owned copies of everything one case file will hold, in insertion order.
class dump {
 public:
  template <class T>
  void add(std::string name, std::vector<std::uint64_t> shape, std::span<const T> v) {
    static_assert(sizeof(T) == 4);
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    if (n != v.size()) die(name + ": shape does not match the data");
    entry e{std::move(name), std::is_same_v<T, float> ? ckpt::dtype::F32 : ckpt::dtype::I32,
            std::move(shape), std::vector<std::byte>(v.size() * 4)};
    std::memcpy(e.bytes.data(), v.data(), e.bytes.size());
    entries_.push_back(std::move(e));
  }
  void add_scalar(std::string name, float x) { add<float>(std::move(name), {}, std::span(&x, 1)); }
  // The 16 tensors of a parameter or gradient buffer, named prefix + model::tensor_name().
  void add_tensors(const std::string& prefix, const gpt2& m, std::span<const float> buf) {
    for (int i = 0; i < model::num_tensors; ++i) {
      const auto id = static_cast<model::tensor_id>(i);
      add<float>(prefix + std::string(model::tensor_name(id)), model::tensor_shape(m.config(), id),
                 buf.subspan(m.layout().offset(id), m.layout().size(id)));
    }
  }
  // Adds delta to the middle element of an F32 tensor; false if there is none by that name.
  bool perturb(const std::string& name, float delta) {
    for (entry& e : entries_) {
      if (e.name != name || e.type != ckpt::dtype::F32) continue;
      float x;
      const std::size_t at = (e.bytes.size() / 4 / 2) * 4;
      std::memcpy(&x, e.bytes.data() + at, 4);
      x += delta;
      std::memcpy(e.bytes.data() + at, &x, 4);
      return true;
    }
    return false;
  }
  void write(const std::string& path, const ckpt::metadata& meta) const {
    std::vector<ckpt::tensor_view> views;
    for (const entry& e : entries_)
      views.push_back({e.name, e.type, e.shape, e.bytes.data(), e.bytes.size()});
    if (auto st = ckpt::write_safetensors(path, views, meta); !st) die(st.err().to_string());
  }

 private:
  struct entry {
    std::string name;
    ckpt::dtype type;
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<entry> entries_;
};

// After init_random(): matrices ×5 (std 0.1), LayerNorm weights 1 + N(0, 0.2),
// biases and LayerNorm biases N(0, 0.1). wte's padding rows stay 0 (the
// engine's invariant). Any distribution will do: the weights are dumped.
void spread(gpt2& m, std::mt19937& rng) {
  std::normal_distribution<float> n01(0.0f, 1.0f);
  const model::param_layout& lay = m.layout();
  const model::gpt2_config& c = m.config();
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto id = static_cast<model::tensor_id>(i);
    float* t = m.params().data() + lay.offset(id);
    std::size_t n = lay.size(id);
    if (id == model::tensor_id::wte) n = std::size_t(c.vocab) * c.channels;
    const bool ln_weight = id == model::tensor_id::ln1w || id == model::tensor_id::ln2w || id == model::tensor_id::lnfw;
    for (std::size_t k = 0; k < n; ++k) {
      if (model::tensor_decays(id)) t[k] *= 5.0f;
      else t[k] += (ln_weight ? 0.2f : 0.1f) * n01(rng);
    }
  }
}

struct batch_data {
  std::vector<std::int32_t> inputs, targets;
  std::vector<float> weights;  // always filled (ones when unweighted) for the dump
};

batch_data draw_batch(const parity_case& pc, std::mt19937& rng) {
  const std::size_t n = std::size_t(pc.batch) * pc.seq_len;
  batch_data b{std::vector<std::int32_t>(n), std::vector<std::int32_t>(n), std::vector<float>(n, 1.0f)};
  const auto V = unsigned(pc.cfg.vocab);
  for (std::size_t i = 0; i < n; ++i) {
    b.inputs[i] = std::int32_t(rng() % V);
    b.targets[i] = std::int32_t(rng() % V);
    if (pc.weighted) b.weights[i] = 0.5f * float(rng() % 4);  // about a quarter masked
  }
  if (pc.weighted) b.weights[0] = 1.0f;  // never all masked
  return b;
}

ckpt::metadata case_metadata(const parity_case& pc) {
  auto s = [](auto x) { return std::to_string(x); };
  const model::gpt2_config& c = pc.cfg;
  ckpt::metadata m{
      {"layers", s(c.layers)}, {"heads", s(c.heads)}, {"channels", s(c.channels)},
      {"max_seq_len", s(c.max_seq_len)}, {"vocab", s(c.vocab)}, {"padded_vocab", s(c.padded_vocab)},
      {"batch", s(pc.batch)}, {"seq_len", s(pc.seq_len)}, {"weighted", pc.weighted ? "1" : "0"},
      {"micro_batches", s(pc.micro_batches)}, {"steps", s(pc.steps)}, {"seed", s(pc.seed)},
      {"spread_weights", pc.spread_weights ? "1" : "0"}};
  if (pc.steps > 0) {
    // %.9g round-trips a float exactly.
    auto f = [](float x) { char b[32]; std::snprintf(b, sizeof b, "%.9g", x); return std::string(b); };
    m.insert({{"beta1", f(opt_cfg.beta1)}, {"beta2", f(opt_cfg.beta2)}, {"eps", f(opt_cfg.eps)},
              {"weight_decay", f(opt_cfg.weight_decay)}, {"max_lr", f(schedule.max_lr)},
              {"min_lr", f(schedule.min_lr)}, {"warmup_steps", s(schedule.warmup_steps)},
              {"total_steps", s(schedule.total_steps)}, {"grad_clip", f(grad_clip)}});
  }
  return m;
}

// One case: forward + backward on micro-batch 0 at the initial weights, then
// pc.steps train_steps over all micro-batches.
dump run_case(const parity_case& pc) {
  auto created = gpt2::create(pc.cfg, pc.batch, pc.seq_len);
  if (!created) die(created.err().to_string());
  gpt2 model = std::move(*created);
  model.init_random(pc.seed);
  std::mt19937 rng(static_cast<std::uint32_t>(pc.seed));
  if (pc.spread_weights) spread(model, rng);
  std::vector<batch_data> mbs;
  for (int j = 0; j < pc.micro_batches; ++j) mbs.push_back(draw_batch(pc, rng));

  dump d;
  d.add_tensors("", model, model.params());
  std::vector<micro_batch> micro;
  for (int j = 0; j < pc.micro_batches; ++j) {
    const batch_data& b = mbs[j];
    const std::string p = "mb" + std::to_string(j) + ".";
    const std::vector<std::uint64_t> bt{std::uint64_t(pc.batch), std::uint64_t(pc.seq_len)};
    d.add<std::int32_t>(p + "inputs", bt, b.inputs);
    d.add<std::int32_t>(p + "targets", bt, b.targets);
    d.add<float>(p + "weights", bt, b.weights);
    micro.push_back({b.inputs, b.targets, pc.weighted ? std::span<const float>(b.weights)
                                                      : std::span<const float>()});
  }

  result<float> loss = model.forward(micro[0].inputs, micro[0].targets, micro[0].weights);
  if (!loss) die(loss.err().to_string());
  d.add<float>("logits", {std::uint64_t(pc.batch), std::uint64_t(pc.seq_len),
                          std::uint64_t(pc.cfg.padded_vocab)},
               model.logits());  // before backward(), which overwrites them
  d.add_scalar("loss", *loss);
  model.backward(1.0f, /*accumulate=*/false);
  d.add_tensors("grad.", model, model.grads());

  adamw opt(model.layout().total, opt_cfg, model.layout().ranges());
  for (int s = 0; s < pc.steps; ++s) {
    auto st = train_step(model, opt, schedule, grad_clip, s, micro);
    if (!st) die(st.err().to_string());
    const std::string p = "step" + std::to_string(s) + ".";
    d.add_scalar(p + "loss", st->loss);
    d.add_scalar(p + "grad_norm", st->grad_norm);
    d.add_scalar(p + "lr", st->lr);
    d.add_tensors(p + "grad.", model, model.grads());  // train_step leaves them unclipped
    d.add_tensors(p + "param.", model, model.params());
    std::printf("  %s step %d: loss %.6f grad norm %.6f lr %.6g\n", pc.name, s, st->loss,
                st->grad_norm, st->lr);
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--perturb")) {
    std::fprintf(stderr, "usage: engine_dump OUT_DIR [--perturb TENSOR]\n");
    return 2;
  }
  const std::string dir = argv[1], perturbed = argc == 4 ? argv[3] : "";
  int n_perturbed = 0;
  for (const parity_case& pc : cases) {
    dump d = run_case(pc);
    ckpt::metadata meta = case_metadata(pc);
    if (!perturbed.empty() && d.perturb(perturbed, perturb_delta)) {
      meta["perturbed"] = perturbed;
      ++n_perturbed;
    }
    const std::string path = dir + "/" + pc.name + ".safetensors";
    d.write(path, meta);
    std::printf("engine_dump: wrote %s\n", path.c_str());
  }
  if (!perturbed.empty() && n_perturbed == 0) die("--perturb: no case has an F32 tensor " + perturbed);
  return 0;
}
