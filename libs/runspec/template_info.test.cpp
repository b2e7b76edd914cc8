// Every template under templates/ (recursive) resolves, opens with a header
// comment saying when to use it, and every industry template has a sample
// corpus and a valid [ingest] section; bad [ingest] sections are refused
// naming the file and line.
#include "libs/runspec/job_template.hpp"
#include "libs/runspec/template_info.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

using namespace loom;
using namespace loom::runspec;
namespace fs = std::filesystem;

namespace {

const fs::path templates_dir = fs::path(LOOM_SOURCE_DIR) / "templates";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// name -> file: "pretrain-tiny" for templates/pretrain-tiny.toml,
// "industry/legal" for templates/industry/legal/template.toml.
std::map<std::string, fs::path> all_templates() {
  std::map<std::string, fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(templates_dir)) {
    if (!e.is_regular_file() || e.path().extension() != ".toml") continue;
    const fs::path rel = fs::relative(e.path(), templates_dir);
    if (rel.filename() == "template.toml") out[rel.parent_path().generic_string()] = e.path();
    else out[(rel.parent_path() / rel.stem()).generic_string()] = e.path();
  }
  return out;
}

std::string msg(const result<ingest_settings>& r) { return r.ok() ? std::string("ok") : r.err().message; }

}  // namespace

TEST_CASE("every template under templates/ resolves, with a data source, and opens with a header comment") {
  const auto all = all_templates();
  CHECK(all.size() >= 22);  // 12+ training templates and 10+ industry ones
  std::size_t industry = 0, training = 0;
  for (const auto& [name, path] : all) {
    INFO(name);
    const std::string text = slurp(path);
    const auto header = template_header(text);
    REQUIRE(header.size() >= 2);  // a summary line and at least one line on how to use it
    CHECK(template_summary(text).rfind(name + ":", 0) == 0);  // "name: when to use it"
    // dpo and rl templates start from an SFT checkpoint the user names.
    std::vector<std::string> set = {"text=/data/corpus.txt"};
    if (name.rfind("dpo-", 0) == 0 || name.rfind("rl-", 0) == 0) set.push_back("model.init_from=/data/sft/checkpoints");
    auto plan = resolve_template(name, text, set);
    INFO((plan.ok() ? std::string() : plan.err().message));
    REQUIRE(plan.ok());
    CHECK(!plan->stages.empty());
    for (const auto& st : plan->stages) CHECK((runnable_kind(st.spec.kind) || st.spec.kind == "hpo"));  // hpo: the scheduler's
    auto ingest = read_ingest_section(name, text);
    REQUIRE(ingest.ok());
    if (name.rfind("industry/", 0) == 0) {
      ++industry;
      CHECK(ingest->present);
      const fs::path sample = path.parent_path() / "sample";
      REQUIRE(fs::is_directory(sample));
      std::uintmax_t bytes = 0;
      for (const auto& f : fs::directory_iterator(sample)) {
        bytes += fs::file_size(f.path());
        if (!ingest->formats.empty())  // the sample is importable under its own template's formats
          CHECK(std::count(ingest->formats.begin(), ingest->formats.end(), ingest_format_of(f.path().string())) == 1);
      }
      CHECK(bytes >= 3000);
      CHECK(bytes <= 40000);
      REQUIRE(plan->stages.size() == 2);  // pretrain -> SFT
      CHECK(plan->stages[1].spec.kind == "sft");
    } else {
      ++training;
      CHECK_FALSE(ingest->present);
    }
  }
  CHECK(industry >= 10);
  CHECK(training >= 12);
}

TEST_CASE("the header comment is the leading comment lines and the summary its first") {
  const char* t = "# a: one line\n#   loom job submit --template a\n#\n[train]\n# not header\n";
  auto h = template_header(t);
  REQUIRE(h.size() == 3);
  CHECK(h[0] == "a: one line");
  CHECK(h[1] == "  loom job submit --template a");
  CHECK(h[2] == "");
  CHECK(template_summary(t) == "a: one line");
  CHECK(template_summary("[train]\n# late\n").empty());
}

TEST_CASE("an [ingest] section is read, and a job template carrying one still resolves") {
  const char* t =
      "# t: x\n[ingest]\nprofile = \"web\"\ndeny_licences = [\"GPL-3.0\", \"CC-BY-NC-*\"]\npii = false\n"
      "dedup = true\ntext_field = \"body\"\nformats = [\"jsonl\", \"text\"]\n[train]\nsteps = 3\n";
  auto s = read_ingest_section("industry/t", t);
  REQUIRE(s.ok());
  CHECK(s->present);
  CHECK(s->profile == "web");
  CHECK(s->deny_licences == std::vector<std::string>{"GPL-3.0", "CC-BY-NC-*"});
  CHECK(s->pii == false);
  CHECK(s->dedup == true);
  CHECK(s->text_field == "body");
  CHECK(s->formats == std::vector<std::string>{"jsonl", "text"});
  auto plan = resolve_template("industry/t", t, {"text=/c.txt"});
  REQUIRE(plan.ok());
  CHECK(plan->stages[0].config_toml.find("ingest") == std::string::npos);  // the trainer never sees it
  auto none = read_ingest_section("x", "[train]\nsteps = 3\n");
  REQUIRE(none.ok());
  CHECK_FALSE(none->present);
  CHECK_FALSE(none->pii.has_value());
}

TEST_CASE("an unknown [ingest] key or a bad value is refused naming the template file and line") {
  const std::string t = "# t: x\n[ingest]\nprofile = \"web\"\nredact_names = true\n";
  CHECK(msg(read_ingest_section("industry/t", t)).find("industry/t.toml:4: ingest.redact_names is not a known key") !=
        std::string::npos);
  // The scheduler refuses the same template at submit, with the same words.
  auto plan = resolve_template("industry/t", t, {"text=/c.txt"});
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.err().code == errc::invalid_argument);
  CHECK(plan.err().message.find("industry/t.toml:4: ingest.redact_names") != std::string::npos);
  CHECK(msg(read_ingest_section("t", "[ingest]\nprofile = \"fast\"\n")).find("t.toml:2: ingest.profile must be one of") !=
        std::string::npos);
  CHECK(msg(read_ingest_section("t", "[ingest]\n\npii = \"yes\"\n")).find("t.toml:3: ingest.pii must be true or false") !=
        std::string::npos);
  CHECK(msg(read_ingest_section("t", "[ingest]\nformats = [\"pdf\"]\n")).find("\"pdf\" is not one of text, markdown") !=
        std::string::npos);
  CHECK(msg(read_ingest_section("t", "[ingest]\ndeny_licences = \"GPL-3.0\"\n")).find("must be an array") !=
        std::string::npos);
  CHECK(msg(read_ingest_section("t", "ingest = 3\n")).find("[ingest] must be a table") != std::string::npos);
}

TEST_CASE("a file's ingest format follows the readers' extension rules") {
  CHECK(ingest_format_of("a/b/notes.txt") == "text");
  CHECK(ingest_format_of("README") == "text");
  CHECK(ingest_format_of("chat.JSONL") == "jsonl");
  CHECK(ingest_format_of("logs.jsonl.gz") == "jsonl");
  CHECK(ingest_format_of("x.tar.gz") == "archive");
  CHECK(ingest_format_of("page.htm") == "html");
  CHECK(ingest_format_of("LGPL-2.1") == "text");
  CHECK(ingest_format_of("scan.pdf") == "");
}
