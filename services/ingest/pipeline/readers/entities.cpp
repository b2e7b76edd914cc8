#include "services/ingest/pipeline/readers/entities.hpp"

#include "services/ingest/pipeline/utf8.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

namespace loom::ingest {
namespace {

// HTML 4 Latin-1 names, in code point order from U+00A0.
constexpr std::array<const char*, 96> latin1 = {
    "nbsp",   "iexcl",  "cent",   "pound",  "curren", "yen",    "brvbar", "sect",   "uml",    "copy",
    "ordf",   "laquo",  "not",    "shy",    "reg",    "macr",   "deg",    "plusmn", "sup2",   "sup3",
    "acute",  "micro",  "para",   "middot", "cedil",  "sup1",   "ordm",   "raquo",  "frac14", "frac12",
    "frac34", "iquest", "Agrave", "Aacute", "Acirc",  "Atilde", "Auml",   "Aring",  "AElig",  "Ccedil",
    "Egrave", "Eacute", "Ecirc",  "Euml",   "Igrave", "Iacute", "Icirc",  "Iuml",   "ETH",    "Ntilde",
    "Ograve", "Oacute", "Ocirc",  "Otilde", "Ouml",   "times",  "Oslash", "Ugrave", "Uacute", "Ucirc",
    "Uuml",   "Yacute", "THORN",  "szlig",  "agrave", "aacute", "acirc",  "atilde", "auml",   "aring",
    "aelig",  "ccedil", "egrave", "eacute", "ecirc",  "euml",   "igrave", "iacute", "icirc",  "iuml",
    "eth",    "ntilde", "ograve", "oacute", "ocirc",  "otilde", "ouml",   "divide", "oslash", "ugrave",
    "uacute", "ucirc",  "uuml",   "yacute", "thorn",  "yuml"};

// Greek capitals from U+0391 (U+03A2 is unassigned), small letters from U+03B1.
constexpr std::array<const char*, 25> greek = {
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
    "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigmaf", "sigma",
    "tau", "upsilon", "phi", "chi", "psi", "omega"};

struct named {
  const char* name;
  char32_t cp;
};
constexpr named others[] = {
    {"amp", 38},       {"lt", 60},        {"gt", 62},        {"quot", 34},      {"apos", 39},
    {"OElig", 338},    {"oelig", 339},    {"Scaron", 352},   {"scaron", 353},   {"Yuml", 376},
    {"fnof", 402},     {"circ", 710},     {"tilde", 732},    {"ensp", 8194},    {"emsp", 8195},
    {"thinsp", 8201},  {"zwnj", 8204},    {"zwj", 8205},     {"lrm", 8206},     {"rlm", 8207},
    {"ndash", 8211},   {"mdash", 8212},   {"lsquo", 8216},   {"rsquo", 8217},   {"sbquo", 8218},
    {"ldquo", 8220},   {"rdquo", 8221},   {"bdquo", 8222},   {"dagger", 8224},  {"Dagger", 8225},
    {"bull", 8226},    {"hellip", 8230},  {"permil", 8240},  {"prime", 8242},   {"Prime", 8243},
    {"lsaquo", 8249},  {"rsaquo", 8250},  {"oline", 8254},   {"frasl", 8260},   {"euro", 8364},
    {"trade", 8482},   {"larr", 8592},    {"uarr", 8593},    {"rarr", 8594},    {"darr", 8595},
    {"harr", 8596},    {"lArr", 8656},    {"rArr", 8658},    {"hArr", 8660},    {"forall", 8704},
    {"part", 8706},    {"exist", 8707},   {"empty", 8709},   {"nabla", 8711},   {"isin", 8712},
    {"notin", 8713},   {"prod", 8719},    {"sum", 8721},     {"minus", 8722},   {"radic", 8730},
    {"prop", 8733},    {"infin", 8734},   {"and", 8743},     {"or", 8744},      {"cap", 8745},
    {"cup", 8746},     {"int", 8747},     {"there4", 8756},  {"sim", 8764},     {"asymp", 8776},
    {"ne", 8800},      {"equiv", 8801},   {"le", 8804},      {"ge", 8805},      {"sub", 8834},
    {"sup", 8835},     {"loz", 9674},     {"spades", 9824},  {"clubs", 9827},   {"hearts", 9829},
    {"diams", 9830},   {"thetasym", 977}, {"upsih", 978},    {"piv", 982},      {"nbhy", 8209}};

const std::unordered_map<std::string_view, char32_t>& table() {
  static const auto* t = [] {
    auto* m = new std::unordered_map<std::string_view, char32_t>();
    for (std::size_t i = 0; i < latin1.size(); ++i) m->emplace(latin1[i], 0xA0 + i);
    // Capitals: same names with the first letter upper-cased; stored once, here.
    static std::array<std::string, greek.size()> caps;
    for (std::size_t i = 0; i < greek.size(); ++i) {
      m->emplace(greek[i], 0x3B1 + i);
      if (std::string_view(greek[i]) == "sigmaf") continue;  // no capital final sigma
      caps[i] = greek[i];
      caps[i][0] = static_cast<char>(caps[i][0] - 'a' + 'A');
      m->emplace(caps[i], 0x391 + i);
    }
    for (const auto& o : others) m->emplace(o.name, o.cp);
    return m;
  }();
  return *t;
}

}  // namespace

std::optional<char32_t> named_entity(std::string_view name) {
  const auto& t = table();
  auto it = t.find(name);
  if (it == t.end()) return std::nullopt;
  return it->second;
}

bool append_entity(std::string_view ref, std::string& out) {
  if (ref.empty()) return false;
  if (ref[0] != '#') {
    auto cp = named_entity(ref);
    if (!cp) return false;
    utf8::append(out, *cp);
    return true;
  }
  ref.remove_prefix(1);
  int base = 10;
  if (!ref.empty() && (ref[0] == 'x' || ref[0] == 'X')) {
    base = 16;
    ref.remove_prefix(1);
  }
  if (ref.empty() || ref.size() > 8) return false;
  char32_t cp = 0;
  for (char c : ref) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    cp = cp * base + d;
  }
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  utf8::append(out, cp);
  return true;
}

void decode_entities(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  std::size_t i = 0;
  while (i < in.size()) {
    std::size_t amp = in.find('&', i);
    if (amp == std::string_view::npos) {
      out.append(in.substr(i));
      break;
    }
    out.append(in.substr(i, amp - i));
    // Longest known reference is 8 characters; look a little further.
    std::size_t semi = in.find(';', amp + 1);
    if (semi != std::string_view::npos && semi - amp <= 12 && append_entity(in.substr(amp + 1, semi - amp - 1), out)) {
      i = semi + 1;
    } else {
      out += '&';
      i = amp + 1;
    }
  }
}

}  // namespace loom::ingest
