#include "libs/engine/train_step.hpp"

namespace loom::engine {

result<step_stats> train_step(gpt2& model, adamw& opt, const lr_schedule& schedule, float grad_clip, int step,
                              std::span<const micro_batch> micro, const data_parallel* dp) {
  if (micro.empty()) return make_error(errc::invalid_argument, "train_step: no micro-batch");
  if (dp && (dp->total_micro < static_cast<int>(micro.size()) || !dp->all_reduce_sum))
    return make_error(errc::invalid_argument, "train_step: data_parallel needs total_micro >= this member's "
                                              "micro-batches and an all_reduce_sum");
  const float k = static_cast<float>(dp ? dp->total_micro : static_cast<int>(micro.size()));
  double loss = 0.0;
  bool first = true;
  for (const micro_batch& mb : micro) {
    if (mb.targets.empty())
      return make_error(errc::invalid_argument, "train_step: a micro-batch without targets");
    result<float> l = model.forward(mb.inputs, mb.targets, mb.weights);
    if (!l) return l.err();
    if (!model.backward(1.0f / k, /*accumulate=*/!first))  // the first overwrites: no zero_grad pass
      return make_error(errc::unavailable, "train_step: interrupted (stop requested)");
    first = false;
    loss += *l;
  }
  if (dp) {  // the whole step's gradient and loss, on every member
    if (auto st = dp->all_reduce_sum(model.grads()); !st) return st.err();
    float sum = static_cast<float>(loss);
    if (auto st = dp->all_reduce_sum(std::span<float>(&sum, 1)); !st) return st.err();
    loss = sum;
  }
  step_stats s;
  s.loss = static_cast<float>(loss / k);
  const double norm = global_norm(model.grads());
  s.grad_norm = static_cast<float>(norm);
  s.lr = schedule.at(step);
  const gpt2::update_target to = model.params_for_update();  // bf16: the copy is written in the same pass
  opt.step(to.params, model.grads(), s.lr, clip_scale(norm, grad_clip), to.bf16);
  return s;
}

}  // namespace loom::engine
