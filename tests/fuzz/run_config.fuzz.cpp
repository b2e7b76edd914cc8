// Fuzzes the run-config parser (libs/runspec/run_config.hpp,
// parse_run_config), and for configs that parse the hpo-stage reader
// (hpo_stage.hpp) and with_overrides: a stage's config text is what a
// submitter wrote (through a template) and what a trainer receives from the
// scheduler, and `loom-trainer train --config` reads a user's file.
// Input layout: tests/fuzz/toml_input.hpp.
#include "libs/runspec/hpo_stage.hpp"
#include "libs/runspec/run_config.hpp"
#include "tests/fuzz/toml_input.hpp"

using namespace loom::runspec;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto in = loom::fuzz::split_toml_input(data, size);
  auto c = parse_run_config(in.toml, "/fuzz/run.toml", in.overrides);
  if (!c.ok()) return 0;
  (void)c->memory();
  if (c->kind == "hpo") (void)read_hpo_stage(in.toml, "/fuzz/run.toml", *c);
  if (!in.overrides.empty()) (void)with_overrides(in.toml, in.overrides);
  return 0;
}
