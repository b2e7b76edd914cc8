// Fuzzes job-template resolution (libs/runspec/job_template.hpp,
// resolve_template) and the template readers beside it (template_info.hpp):
// `loom job submit` sends the template's text and the --set overrides to the
// scheduler, which resolves them on its logic thread, so both are outside
// input (up to max_template_bytes). Input layout: tests/fuzz/toml_input.hpp.
// Every stage of a resolved plan must parse again from its own config text.
#include "libs/runspec/job_template.hpp"
#include "libs/runspec/template_info.hpp"
#include "tests/fuzz/toml_input.hpp"

#include <cstdlib>

using namespace loom::runspec;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto in = loom::fuzz::split_toml_input(data, size);
  (void)template_header(in.toml);
  (void)template_summary(in.toml);
  (void)read_ingest_section("fuzz", in.toml);
  auto plan = resolve_template("fuzz", in.toml, in.overrides);
  if (!plan.ok()) return 0;
  if (plan->stages.empty()) std::abort();
  for (const auto& st : plan->stages) {
    if (!parse_run_config(st.config_toml, "/fuzz/" + st.name + ".toml").ok()) std::abort();
    (void)fill_stage_references(st.config_toml, "/fuzz/out");
  }
  return 0;
}
