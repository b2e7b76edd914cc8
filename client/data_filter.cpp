// `loom data train-filter --kind text|image ... --out FILE [--force] [--json]`:
// trains a learned filter for `loom data import --text-filter / --image-filter`
// (issue 33). Offline: no service; --out is checked as train-tokenizer's is
// (never an input, never in a data dir's private part, an existing file only
// with --force).
//   --kind text   PATH = reference text (a file or directory: one document per
//                 file). A small byte-level GPT learns it (CCNet-style
//                 perplexity buckets); with --good DIR and --bad DIR a quality
//                 head is trained on its pooled states too (libs/textq).
//                 --steps N (default 300).
//   --kind image  PATH = a directory with one subdirectory per label (ok/,
//                 blank/, blurred/, corrupted/, mostly_text/), or --generated N:
//                 N images per label from the built-in generator (libs/vision).
//                 --epochs N (default 6).
// Exit codes: 0 ok, 1 unreadable input or unwritable output, 2 usage,
// 3 an --out in a data dir's private part.
#include "client/cli.hpp"
#include "client/input.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/layout/layout.hpp"
#include "libs/textq/filter_model.hpp"
#include "libs/textq/train.hpp"
#include "libs/vision/filter.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

namespace loom::cli {
namespace {

using clock_type = std::chrono::steady_clock;

int data_error(const context& c, const error& e) {
  (void)fail(c, e);
  return error_exit;
}

result<std::vector<std::string>> files_of(const context& c, const char* flag) {
  const auto p = c.a.get(flag);
  if (!p) return std::vector<std::string>{};
  return input_files(*p);
}

int print(const context& c, const nlohmann::json& j, const std::string& text) {
  const std::string out = c.json ? j.dump() + "\n" : text;
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    return data_error(c, make_error(errc::internal, "writing to stdout failed"));
  return ok_exit;
}

int threads() { return static_cast<int>(std::max(1u, std::min(std::thread::hardware_concurrency(), 8u))); }

int train_text(context& c, const std::string& out) {
  if (c.a.positional.size() != 3) return usage("loom data train-filter --kind text PATH: the reference text is required");
  auto ref = input_files(c.a.positional[2]);
  if (!ref) return data_error(c, ref.err());
  auto good = files_of(c, "good");
  if (!good) return data_error(c, good.err());
  auto bad = files_of(c, "bad");
  if (!bad) return data_error(c, bad.err());
  if (good->empty() != bad->empty()) return usage("loom data train-filter: --good and --bad come together");
  loom::files::output_rules rules;
  rules.force = c.a.flag("force");
  for (const auto* set : {&*ref, &*good, &*bad}) rules.inputs.insert(rules.inputs.end(), set->begin(), set->end());
  if (auto st = layout::check_output(c.paths, out, rules); !st) return fail(c, st.err());
  textq::train_options o;
  if (auto n = c.a.number("steps")) o.steps = static_cast<int>(*n);
  o.threads = threads();
  textq::train_report r;
  const auto t0 = clock_type::now();
  auto m = textq::train_filter_files(o, *ref, *good, *bad, &r);
  if (!m) return data_error(c, m.err());
  if (auto st = textq::save(*m, out); !st) return data_error(c, st.err());
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  nlohmann::json j{{"out", out},           {"kind", "text"},
                   {"steps", r.steps},     {"first_loss", r.first_loss},
                   {"final_loss", r.final_loss}, {"holdout_ppl_median", r.holdout_ppl_median},
                   {"reference_docs", r.reference_docs}, {"labelled_docs", r.labelled_docs},
                   {"quality_head", r.labelled_docs > 0}, {"seconds", secs}};
  char line[512];
  std::snprintf(line, sizeof line,
                "wrote %s: a text filter (byte-level GPT, %d steps, loss %.3f -> %.3f nats/byte; held-out perplexity "
                "median %.2f over %zu reference documents%s) in %.1f s\n",
                printable(out).c_str(), r.steps, r.first_loss, r.final_loss, r.holdout_ppl_median, r.reference_docs,
                r.labelled_docs ? (", quality head on " + std::to_string(r.labelled_docs) + " labelled").c_str() : "",
                secs);
  return print(c, j, line);
}

int train_image(context& c, const std::string& out) {
  const auto generated = c.a.number("generated");
  if ((c.a.positional.size() == 3) == generated.has_value())
    return usage("loom data train-filter --kind image: give a labelled directory or --generated N, not both");
  loom::files::output_rules rules;
  rules.force = c.a.flag("force");
  if (!generated) rules.inputs.push_back(c.a.positional[2]);
  if (auto st = layout::check_output(c.paths, out, rules); !st) return fail(c, st.err());
  vision::filter_options o;
  if (auto n = c.a.number("epochs")) o.epochs = static_cast<int>(*n);
  engine::kernels::set_threads(threads());
  const auto t0 = clock_type::now();
  auto m = generated ? vision::train_image_filter_generated(o, static_cast<int>(*generated), 1)
                     : vision::train_image_filter_from_dir(o, c.a.positional[2]);
  if (!m) return data_error(c, m.err());
  if (auto st = vision::save(*m, out); !st) return data_error(c, st.err());
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  nlohmann::json j{{"out", out}, {"kind", "image"}, {"epochs", o.epochs}, {"seconds", secs},
                   {"parameters", m->params.size()}};
  char line[256];
  std::snprintf(line, sizeof line, "wrote %s: an image filter (CNN, %zu parameters, %d epochs) in %.1f s\n",
                printable(out).c_str(), m->params.size(), o.epochs, secs);
  return print(c, j, line);
}

}  // namespace

int cmd_data_train_filter(context& c) {
  const std::string kind = c.a.get_or("kind", "");
  const std::string out = c.a.get_or("out", kind == "image" ? "image-filter.cnn" : "text-filter.gpt");
  if (kind == "text") return train_text(c, out);
  if (kind == "image") return train_image(c, out);
  return usage("loom data train-filter: --kind text or --kind image");
}

}  // namespace loom::cli
