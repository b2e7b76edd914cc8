#include "tests/pii/labelled.hpp"

#include "tests/pii/values.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace loom::pii::test {
namespace {

// Packages of priority required/important: their copyright files are on every
// Debian 12 machine. Missing ones are skipped (and left out of `sources`).
const char* const carrier_packages[] = {"base-files", "bash",      "coreutils", "dpkg",     "apt",
                                        "libc6",      "tar",       "grep",      "sed",      "gzip",
                                        "findutils",  "diffutils", "util-linux", "perl-base", "login",
                                        "debianutils", "mawk",     "ncurses-base", "dash",  "zlib1g"};

struct wrapper {
  const char* before;
  const char* after;
};
// Contexts an item is written in; the item replaces one space of the prose.
const wrapper wrappers[] = {
    {" ", " "},         {" (", ") "},        {" <", "> "},          {" \"", "\" "},    {" '", "' "},
    {" [", "] "},       {" ", ". "},         {" ", ", "},           {" ", "; "},       {" key=", " "},
    {"\n", "\n"},       {"\t", "\t"},        {" \xc2\xab", "\xc2\xbb "},  {" \xe2\x80\x9c", "\xe2\x80\x9d "},
    {" {\"v\":\"", "\"} "}, {"\nid,", ",x\n"}, {" \xff", "\xfe "},  {" \x80", "\x80 "}};

// Words a writer puts before an item of each type.
const char* label_for(pii_type t, std::size_t k) {
  static const char* const email[] = {"e-mail: ", "contact ", "mailto:", "From: "};
  static const char* const phone[] = {"Tel. ", "phone: ", "call ", "tel:"};
  static const char* const ipv4[] = {"host ", "IP address ", "from ", "addr="};
  static const char* const ipv6[] = {"host ", "IPv6 address ", "via ", "addr="};
  static const char* const card[] = {"card no. ", "Visa ", "paid with ", "CC: "};
  static const char* const iban[] = {"IBAN ", "IBAN: ", "account ", "to "};
  static const char* const ssn[] = {"SSN ", "SSN: ", "social security number ", "ssn="};
  static const char* const secret[] = {"token: ", "api_key=", "Authorization: Bearer ", "secret "};
  const char* const* l[] = {email, phone, ipv4, ipv6, card, iban, ssn, secret};
  return l[static_cast<std::size_t>(t)][k % 4];
}

// "(617) 542-5942": the one real phone number format in the carrier files.
bool us_phone_like(const std::string& line) {
  const auto d = [&](std::size_t i) { return i < line.size() && line[i] >= '0' && line[i] <= '9'; };
  for (std::size_t i = 0; i + 14 <= line.size(); ++i)
    if (line[i] == '(' && d(i + 1) && d(i + 2) && d(i + 3) && line[i + 4] == ')' && line[i + 5] == ' ' && d(i + 6) &&
        d(i + 7) && d(i + 8) && line[i + 9] == '-' && d(i + 10) && d(i + 11) && d(i + 12) && d(i + 13))
      return true;
  return false;
}

bool multiline(const std::string& s) { return s.find('\n') != std::string::npos; }

}  // namespace

std::vector<std::string> carrier_lines(std::vector<std::string>* sources) {
  std::vector<std::string> files;
  const std::filesystem::path licenses = "/usr/share/common-licenses";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(licenses, ec))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const char* p : carrier_packages) {
    const std::string f = std::string("/usr/share/doc/") + p + "/copyright";
    if (std::filesystem::is_regular_file(f)) files.push_back(f);
  }
  std::vector<std::string> lines;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find('@') != std::string::npos || line.find_first_not_of(" \t\r") == std::string::npos ||
          us_phone_like(line))
        continue;
      lines.push_back(line);
    }
    if (sources) sources->push_back(f);
  }
  return lines;
}

labelled_set make_labelled_set(const set_options& o) {
  labelled_set set;
  const auto lines = carrier_lines(&set.sources);
  value_generator gen(o.seed);

  struct pending {
    pii_type type;
    value v;
    bool near_miss;
  };
  std::vector<pending> todo;
  for (pii_type t : all_types) {
    for (std::size_t i = 0; i < o.per_type; ++i) todo.push_back({t, gen.make(t), false});
    for (std::size_t i = 0; i < o.near_misses; ++i) todo.push_back({t, gen.near_miss(t), true});
  }
  for (std::size_t i = todo.size(); i > 1; --i) std::swap(todo[i - 1], todo[gen.below(i)]);  // Fisher-Yates

  std::size_t line_no = 0;
  for (const pending& p : todo) {
    // One to three lines of prose; the item replaces a space in the middle one.
    const std::size_t before = gen.below(2);
    for (std::size_t k = 0; k < before && !lines.empty(); ++k) {
      set.text += lines[line_no++ % lines.size()];
      set.text += '\n';
    }
    const std::string line = lines.empty() ? std::string("text here") : lines[line_no++ % lines.size()];
    std::size_t cut = line.size();
    std::vector<std::size_t> spaces;
    for (std::size_t i = 0; i < line.size(); ++i)
      if (line[i] == ' ' && i > 0) spaces.push_back(i);
    if (!spaces.empty()) cut = spaces[gen.below(spaces.size())];
    const wrapper w = multiline(p.v.text) ? wrapper{"\n", "\n"} : wrappers[gen.below(std::size(wrappers))];
    set.text.append(line, 0, cut);
    set.text += w.before;
    if (gen.below(3) == 0 && !multiline(p.v.text)) set.text += label_for(p.type, gen.below(4));
    const std::size_t start = set.text.size();
    set.text += p.v.text;
    set.items.push_back(planted{p.type, start, set.text.size(), p.near_miss, p.v.kind});
    set.text += w.after;
    if (cut < line.size()) set.text.append(line, cut + 1, std::string::npos);
    set.text += '\n';
    set.carrier_bytes += line.size();
  }
  return set;
}

}  // namespace loom::pii::test
