#include "client/args.hpp"

#include "client/output.hpp"

#include <cstdlib>

namespace loom::cli {

std::optional<std::string> args::get(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> args::all(const std::string& name) const {
  auto it = repeated.find(name);
  return it == repeated.end() ? std::vector<std::string>{} : it->second;
}

std::string args::get_or(const std::string& name, const std::string& fallback) const {
  auto v = get(name);
  return v ? *v : fallback;
}

std::optional<std::uint64_t> args::number(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second.number;
}

std::optional<std::chrono::milliseconds> args::duration(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second.duration;
}

std::vector<std::string> args::items(const std::string& name) const {
  std::vector<std::string> out;
  const std::string s = get_or(name, "");
  for (std::size_t pos = 0; pos <= s.size();) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

namespace {

// One option as written: --name, --name=value, or --name value.
struct written {
  std::string spelled;  // "--name" or "-h", for messages
  std::string name;
  std::optional<std::string> value;
  bool missing_value = false;  // a value option at the end of the line or before another option
};

// How pass 1 tells a value option from a flag before the command is known:
// by its kind in any row (the rows agree; args.test.cpp checks it).
enum class known { no, flag, value };
known known_anywhere(const std::string& name) {
  for (const auto& o : global_options())
    if (o.name == name) return o.kind == value_kind::flag ? known::flag : known::value;
  for (const auto& c : command_table())
    for (const auto& o : c.options)
      if (o.name == name) return o.kind == value_kind::flag ? known::flag : known::value;
  return known::no;
}

bool has_subcommands(const std::string& word) {
  for (const auto& c : command_table())
    if (c.path.starts_with(word + " ")) return true;
  return false;
}

error usage_error(const command_spec* c, const std::string& what) {
  std::string msg = "loom" + (c ? " " + c->path : std::string()) + ": " + what;
  if (c) msg += "\n" + usage_line(*c) + "\n(`loom " + c->path + " --help` says more)";
  return make_error(errc::invalid_argument, msg);
}

// The command the words name, and how many words that took.
result<std::pair<const command_spec*, std::size_t>> resolve(const std::vector<std::string>& words) {
  const std::string top = "usage: loom COMMAND [options]\n" + overview();
  if (words.empty()) return make_error(errc::invalid_argument, "loom: missing command\n" + top);
  if (const auto* c = find_command(words[0])) return std::pair{c, std::size_t{1}};
  if (!has_subcommands(words[0]))
    return make_error(errc::invalid_argument, "loom: unknown command '" + printable(words[0]) + "'\n" + top);
  const std::string subs = "usage:\n" + overview(words[0]);
  if (words.size() < 2) return make_error(errc::invalid_argument, "loom " + words[0] + ": missing subcommand\n" + subs);
  if (const auto* c = find_command(words[0] + " " + words[1])) return std::pair{c, std::size_t{2}};
  return make_error(errc::invalid_argument,
                    "loom " + words[0] + ": unknown subcommand '" + printable(words[1]) + "'\n" + subs);
}

}  // namespace

result<args> parse(const std::vector<std::string>& argv) {
  // Pass 1: split options from words.
  std::vector<written> opts;
  std::vector<std::string> words;
  bool only_words = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (only_words || s.size() < 2 || s[0] != '-') {
      words.push_back(s);
      continue;
    }
    if (s == "--") {
      only_words = true;
      continue;
    }
    written w;
    const bool dashes = s[1] == '-';
    std::string body = s.substr(dashes ? 2 : 1);
    if (auto eq = body.find('='); eq != std::string::npos) {
      w.value = body.substr(eq + 1);
      body.resize(eq);
    }
    w.spelled = (dashes ? "--" : "-") + body;
    w.name = dashes || body == "h" ? body : "-" + body;  // "-x" is never a known name
    if (!w.value && known_anywhere(w.name) == known::value) {
      if (i + 1 < argv.size() && !argv[i + 1].starts_with("--")) w.value = argv[++i];
      else w.missing_value = true;
    }
    opts.push_back(std::move(w));
  }

  // An option no command knows is named first: it may have swallowed a word.
  auto cmd = resolve(words);
  const command_spec* c = cmd ? cmd->first : nullptr;
  for (const auto& w : opts)
    if (known_anywhere(w.name) == known::no)
      return usage_error(c, "unknown option " + printable(w.spelled));

  args a;
  a.positional = words;
  for (const auto& w : opts)
    if (w.name == "help" || w.name == "h") a.help = true;
  if (!cmd) {
    if (a.help && (words.empty() || (words.size() == 1 && has_subcommands(words[0])))) return a;
    return cmd.err();
  }
  a.command = c;

  // Pass 2: every option against the command's row.
  for (const auto& w : opts) {
    const option_spec* o = find_option(*c, w.name);
    if (!o) return usage_error(c, "unknown option " + printable(w.spelled));
    if (w.missing_value) return usage_error(c, "option " + w.spelled + " needs a value");
    if (o->kind == value_kind::flag) {
      if (w.value) return usage_error(c, "option " + w.spelled + " takes no value (got '" + printable(*w.value) + "')");
      a.flags.insert(o->name);
      continue;
    }
    auto v = check_value(*o, *w.value);
    if (!v) return usage_error(c, v.err().message);
    a.options[o->name] = *w.value;
    a.repeated[o->name].push_back(*w.value);
    a.values[o->name] = std::move(*v);
  }
  if (a.help) return a;
  for (const auto& o : c->options)
    if (o.required && !a.options.count(o.name)) return usage_error(c, "--" + o.name + " is required");
  for (std::size_t i = cmd->second; i < words.size(); ++i)  // "" would mean the current directory, or nothing
    if (words[i].empty()) return usage_error(c, "an empty argument where " + c->operands + " goes");
  const std::size_t operands = words.size() - cmd->second;
  if (operands < c->min_operands)
    return usage_error(c, "missing " + c->operands);
  if (operands > c->max_operands)
    return usage_error(c, "unexpected argument '" + printable(words[cmd->second + c->max_operands]) + "'");
  return a;
}

status check_environment(const args& a) {
  if (a.options.count("data-dir")) return ok_status();
  if (const char* h = std::getenv("LOOM_HOME"); h && !*h)
    return make_error(errc::invalid_argument,
                      "loom: $LOOM_HOME is set but empty; unset it (for ~/.local/share/edgeloom) or name a data dir");
  return ok_status();
}

std::string help_text(const args& a) {
  if (a.command) return command_help(*a.command);
  if (!a.positional.empty())
    return "usage: loom " + a.positional[0] + " SUBCOMMAND [options]\n" + overview(a.positional[0]) +
           "`loom " + a.positional[0] + " SUBCOMMAND --help` lists its options\n";
  std::string globals;
  for (const auto& o : global_options())
    if (o.name != "h") globals += " [--" + o.name + (o.kind == value_kind::flag ? "" : " " + o.metavar) + "]";
  return "usage: loom COMMAND [options]   (every command takes" + globals + ")\n" + overview() +
         "data dir: --data-dir, else $LOOM_HOME, else ~/.local/share/edgeloom\n"
         "`loom COMMAND --help` lists a command's options\n";
}

}  // namespace loom::cli
