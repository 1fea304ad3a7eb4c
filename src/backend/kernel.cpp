#include "thrive/backend/kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <regex>
#include <sstream>

#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::backend {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep))
    if (!trim(item).empty()) out.push_back(trim(item));
  return out;
}

// Splits on commas outside parentheses: "cdiv(T,4),1,1" -> {"cdiv(T,4)", "1", "1"}.
std::vector<std::string> split_top_level(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(item));
      item.clear();
    } else {
      item += c;
    }
  }
  out.push_back(trim(item));
  return out;
}

// key=value pairs separated by spaces; `doc=` swallows the rest of the line.
std::map<std::string, std::string> key_values(const std::string& s, const std::string& origin,
                                              int line_no) {
  std::map<std::string, std::string> kv;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    auto eq = tok.find('=');
    if (eq == std::string::npos || eq == 0)
      fail(ErrorCategory::kInput, "{}:{}: '{}': expected key=value", origin, line_no, tok);
    std::string key = tok.substr(0, eq), value = tok.substr(eq + 1);
    if (key == "doc") {
      std::string rest;
      std::getline(in, rest);
      value += rest;
    }
    kv[key] = trim(value);
  }
  return kv;
}

}  // namespace

constexpr size_t kMaxTagLine = 4096;

std::string params_to_string(const Params& params) {
  std::string s;
  for (const auto& [k, v] : params) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

KernelSource KernelSource::parse(const std::string& text, const std::string& origin) {
  KernelSource k;
  k.source = text;
  static const std::regex tag(R"(^\s*//\s*@thrive\s+([a-z]+)\s*(:)?\s*(.*)$)");
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find("@thrive") == std::string::npos) continue;  // cheap pre-filter
    // std::regex recurses per character: bound the line before matching it.
    if (line.size() > kMaxTagLine)
      fail(ErrorCategory::kInput, "{}:{}: a line with '@thrive' of {} characters: expected at most {}",
           origin, line_no, line.size(), kMaxTagLine);
    std::smatch m;
    if (!std::regex_match(line, m, tag)) continue;
    const std::string key = m[1], value = trim(m[3]);
    if (key == "op") {
      k.op = value;
    } else if (key == "backend") {
      if (value != "cpu" && value != "cuda")
        fail(ErrorCategory::kInput, "{}:{}: backend '{}': expected cpu or cuda", origin, line_no,
             value);
      k.backend = value;
    } else if (key == "entry") {
      static const std::regex ident(R"([A-Za-z_][A-Za-z0-9_]*)");
      if (!std::regex_match(value, ident))
        fail(ErrorCategory::kInput, "{}:{}: entry '{}': expected a C identifier", origin, line_no,
             value);
      k.entries.push_back(value);
    } else if (key == "launch") {
      auto kv = key_values(value, origin, line_no);
      LaunchSpec l;
      l.entry = kv["entry"];
      if (l.entry.empty())
        fail(ErrorCategory::kInput, "{}:{}: launch '{}': expected entry=<name>", origin, line_no, value);
      l.block = kv.count("block") ? kv["block"] : "";
      l.smem = kv.count("smem") ? kv["smem"] : "0";
      if (l.block.empty())
        fail(ErrorCategory::kInput, "{}:{}: launch '{}': expected block=<threads expression>",
             origin, line_no, value);
      auto grid = split_top_level(kv.count("grid") ? kv["grid"] : "1");
      if (grid.empty() || grid.size() > 3)
        fail(ErrorCategory::kInput, "{}:{}: grid '{}': expected 1 to 3 comma-separated "
             "expressions", origin, line_no, kv["grid"]);
      for (size_t i = 0; i < grid.size(); ++i) l.grid[i] = grid[i];
      k.launches.push_back(l);
    } else if (key == "params") {
      // Params become -D macros, kernel ids and archive file names: identifiers and plain
      // tokens only (no '/', '..', spaces or quotes).
      static const std::regex name_re(R"([A-Za-z_][A-Za-z0-9_]{0,63})");
      static const std::regex value_re(R"([A-Za-z0-9_+\-][A-Za-z0-9_.+\-]{0,63})");
      for (const auto& [name, v] : key_values(value, origin, line_no)) {
        if (!std::regex_match(name, name_re))
          fail(ErrorCategory::kInput, "{}:{}: param name '{}': expected a C identifier (at most 64 "
               "characters)", origin, line_no, name);
        if (!std::regex_match(v, value_re) || v.find("..") != std::string::npos)
          fail(ErrorCategory::kInput, "{}:{}: param {}='{}': expected letters, digits, '_', '.', "
               "'+' or '-' (at most 64, not starting with '.', no '..')", origin, line_no, name, v);
        k.params[name] = v;
      }
      if (const size_t chars = params_to_string(k.params).size(); chars > 160)
        fail(ErrorCategory::kInput, "{}:{}: params are {} characters together; at most 160 (they "
             "name the kernel's files)", origin, line_no, chars);
    } else if (key == "param") {
      // "@thrive param NAME values=... default=..."; regex put NAME into value.
      std::istringstream pv(value);
      ParamSpec p;
      pv >> p.name;
      std::string rest;
      std::getline(pv, rest);
      auto kv = key_values(rest, origin, line_no);
      p.values = split(kv["values"], ',');
      p.default_value = kv["default"];
      p.doc = kv["doc"];
      if (p.name.empty() || p.values.empty() ||
          std::find(p.values.begin(), p.values.end(), p.default_value) == p.values.end())
        fail(ErrorCategory::kInput,
             "{}:{}: param '{}': expected 'NAME values=a,b,... default=<one of the values>'",
             origin, line_no, value);
      k.param_specs.push_back(p);
    } else {
      fail(ErrorCategory::kInput,
           "{}:{}: unknown tag '@thrive {}': expected op, backend, entry, launch, params or param",
           origin, line_no, key);
    }
  }
  if (k.op.empty())
    fail(ErrorCategory::kInput, "{}: no '// @thrive op: <name>' line: expected the op the kernel "
         "implements", origin);
  if (k.backend.empty()) k.backend = "cpu";
  if (k.entries.empty())
    fail(ErrorCategory::kInput, "{}: no '// @thrive entry: <symbol>' line: expected the exported "
         "entry point", origin);
  if (k.backend == "cpu" && k.entries.size() != 1)
    fail(ErrorCategory::kInput, "{}: {} entries: a cpu kernel has exactly one entry point", origin,
         k.entries.size());
  if (k.backend == "cuda") {
    if (k.launches.empty())
      fail(ErrorCategory::kInput, "{}: no '// @thrive launch: entry=... block=... grid=...' line: "
           "a cuda kernel needs a launch plan", origin);
    for (const auto& l : k.launches)
      if (std::find(k.entries.begin(), k.entries.end(), l.entry) == k.entries.end())
        fail(ErrorCategory::kInput, "{}: launch of '{}': expected one of the declared entries ({})",
             origin, l.entry, fmt::join(k.entries, ", "));
  }
  return k;
}

Params KernelSource::defaults() const {
  Params p;
  for (const auto& s : param_specs) p[s.name] = s.default_value;
  return p;
}

Params KernelSource::simplest() const {
  Params p;
  for (const auto& s : param_specs) p[s.name] = s.values.empty() ? s.default_value : s.values.front();
  return p;
}

KernelSource KernelSource::instantiate(const Params& values) const {
  Params full = defaults();
  for (const auto& [name, v] : values) {
    auto it = std::find_if(param_specs.begin(), param_specs.end(),
                           [&](const ParamSpec& s) { return s.name == name; });
    if (it == param_specs.end())
      fail(ErrorCategory::kInput, "parameter '{}' is not declared by the {} template", name, op);
    if (std::find(it->values.begin(), it->values.end(), v) == it->values.end())
      fail(ErrorCategory::kInput, "parameter {}={}: expected one of {}", name, v,
           fmt::join(it->values, ","));
    full[name] = v;
  }
  KernelSource k = *this;
  k.params = full;
  k.param_specs.clear();
  std::string header = fmt::format("// @thrive op: {}\n// @thrive backend: {}\n", op, backend);
  for (const auto& e : entries) header += "// @thrive entry: " + e + "\n";
  for (const auto& l : launches)
    header += fmt::format("// @thrive launch: entry={} block={} grid={},{},{} smem={}\n", l.entry,
                          l.block, l.grid[0], l.grid[1], l.grid[2], l.smem);
  header += "// @thrive params:";
  for (const auto& [n, v] : full) header += " " + n + "=" + v;
  header += "\n";
  for (const auto& [n, v] : full) header += "#define " + n + " " + v + "\n";
  // Drop the template's own @thrive lines; keep the rest verbatim.
  std::istringstream in(source);
  std::string line, body;
  static const std::regex tag(R"(^\s*//\s*@thrive\s.*$)");
  while (std::getline(in, line))
    if (line.find("@thrive") == std::string::npos || line.size() > kMaxTagLine ||
        !std::regex_match(line, tag))
      body += line + "\n";
  k.source = header + "#line 1\n" + body;
  return k;
}

namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether text[i] follows a preprocessing number (C++ [lex.ppnumber]: a digit, or . and a digit,
// then digits, identifier characters, '.', digit separators and e+ e- p+ p- signs): there a ' is a
// digit separator and an R" does not open a raw string.
bool in_pp_number(const std::string& text, size_t i) {
  size_t p = i;
  while (p > 0) {
    const char c = text[p - 1];
    if (ident_char(c) || c == '.' || c == '\'') {
      --p;
    } else if ((c == '+' || c == '-') && p >= 2 && std::strchr("eEpP", text[p - 2]) != nullptr) {
      p -= 2;
    } else {
      break;
    }
  }
  if (p == i) return false;
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  // the run's start must begin a number (an identifier such as x1 or u8 does not)
  return digit(text[p]) || (text[p] == '.' && p + 1 < i && digit(text[p + 1]));
}

// `source` after translation phases 2 and 3 as far as directives need them: line splices joined,
// comments replaced by one space, a raw string's contents by spaces; `line[i]` is the 1-based
// source line of out[i]. With `blank`, the contents of every string and character literal become
// spaces (for the operator scan).
std::string strip_for_directives(const std::string& raw, bool blank, std::vector<int>& line) {
  // phase 1 as GCC reads a file: a UTF-8 byte-order mark skipped, CR LF and a lone CR both end a line
  std::string src;
  for (size_t i = raw.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      src += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      src += raw[i];
    }
  }
  std::string joined;
  std::vector<int> jl;
  int ln = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\\') {  // backslash, optional horizontal white space (GCC's, NUL too), newline: a splice
      size_t j = i + 1;
      while (j < src.size() && (src[j] == ' ' || src[j] == '\t' || src[j] == '\f' || src[j] == '\v' || src[j] == '\0')) ++j;
      if (j < src.size() && src[j] == '\n') {
        ++ln;
        i = j;
        continue;
      }
    }
    joined += src[i];
    jl.push_back(ln);
    if (src[i] == '\n') ++ln;
  }
  std::string out;
  line.clear();
  const auto put = [&](char c, int l) { out += c, line.push_back(l); };
  for (size_t i = 0; i < joined.size();) {
    const char c = joined[i];
    if (c == '/' && i + 1 < joined.size() && joined[i + 1] == '/') {
      while (i < joined.size() && joined[i] != '\n') ++i;
      put(' ', jl[i - 1]);
    } else if (c == '/' && i + 1 < joined.size() && joined[i + 1] == '*') {
      const size_t end = joined.find("*/", i + 2);
      put(' ', jl[i]);
      i = end == std::string::npos ? joined.size() : end + 2;
    } else if ((c == '"' || c == '\'') && !(c == '\'' && in_pp_number(joined, i))) {
      // (a ' inside a number is a digit separator, 1'000, not a character literal)
      // a raw string: R"delim( ... )delim", R preceded by an optional u8 / u / U / L prefix, and
      // not the end of a number (1.R"( is the number 1.R, then an ordinary string)
      size_t p = i;
      while (p > 0 && ident_char(joined[p - 1])) --p;
      const std::string prefix = joined.substr(p, i - p);
      const bool raw = c == '"' && !in_pp_number(joined, i) &&
                       (prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" || prefix == "LR");
      size_t end;
      if (raw) {
        const size_t open = joined.find('(', i + 1);
        const std::string close = ")" + (open == std::string::npos ? "" : joined.substr(i + 1, open - i - 1)) + "\"";
        end = open == std::string::npos ? std::string::npos : joined.find(close, open);
        end = end == std::string::npos ? joined.size() : end + close.size();
      } else {
        end = i + 1;
        while (end < joined.size() && joined[end] != c && joined[end] != '\n') end += joined[end] == '\\' ? 2 : 1;
        end = std::min(end + 1, joined.size());
      }
      // (a raw string's contents always become spaces, its newlines too: they cannot hold a
      // directive, and an include's operand is never one)
      for (size_t k = i; k < end; ++k)
        put((blank || raw) && k > i && k + 1 < end && (raw || joined[k] != '\n') ? ' ' : joined[k], jl[k]);
      i = end;
      continue;
    } else {
      put(c, jl[i]);
      ++i;
      continue;
    }
  }
  return out;
}

// whether `name` is a header name (not hidden), with `subdirs` a relative path of such names
// (sys/mman.h: no leading '/', no empty, "." or ".." part)
bool plain_header_name(const std::string& name, bool subdirs) {
  size_t b = 0;
  for (;;) {
    const size_t e = subdirs ? name.find('/', b) : std::string::npos;
    const std::string part = name.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (part.empty() || part[0] == '.') return false;
    for (char c : part)
      if (!ident_char(c) && c != '.' && c != '-' && c != '+') return false;
    if (e == std::string::npos) return true;
    b = e + 1;
  }
}

}  // namespace

std::string include_policy_violation(const std::string& source, bool subdirs) {
  std::vector<int> line;
  const std::string code = strip_for_directives(source, false, line);
  const auto shown = [](std::string s) {
    s = trim(s);
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  };
  for (size_t b = 0; b < code.size();) {
    size_t e = code.find('\n', b);
    if (e == std::string::npos) e = code.size();
    const std::string l = code.substr(b, e - b);
    const int at = line.empty() ? 1 : line[std::min(b, line.size() - 1)];
    size_t i = l.find_first_not_of(" \t\r\f\v");
    if (i != std::string::npos && (l[i] == '#' || l.compare(i, 2, "%:") == 0)) {
      i += l[i] == '#' ? 1 : 2;
      while (i < l.size() && (l[i] == ' ' || l[i] == '\t')) ++i;
      size_t j = i;
      while (j < l.size() && ident_char(l[j])) ++j;
      const std::string directive = l.substr(i, j - i);
      if (directive == "include_next" || directive == "import" || directive == "embed")
        return fmt::format("line {}: {}: #{} is not allowed in a kernel (it reads files by path)", at, shown(l), directive);
      if (directive == "include") {
        const std::string operand = trim(l.substr(j));
        const char open = operand.empty() ? '\0' : operand[0];
        const char close = open == '<' ? '>' : '"';
        const size_t end = open == '<' || open == '"' ? operand.find(close, 1) : std::string::npos;
        const bool ok = end != std::string::npos && trim(operand.substr(end + 1)).empty() &&
                        plain_header_name(operand.substr(1, end - 1), subdirs);
        if (!ok)
          return fmt::format(
              "line {}: {}: a kernel may include a header only by its name, <name> or \"name\" (letters, digits, "
              "'_', '-', '+', '.'{}; no macro), from THRIVE's and the compiler's include directories",
              at, shown(l), subdirs ? ", and '/' between such names: no absolute path, no '.' or '..' part" : "; no directory");
      }
    }
    b = e + 1;
  }
  const std::string blanked = strip_for_directives(source, true, line);
  for (const char* op : {"__has_include_next", "__has_include", "__has_embed"}) {
    for (size_t p = blanked.find(op); p != std::string::npos; p = blanked.find(op, p + 1)) {
      const size_t n = std::strlen(op);
      if ((p > 0 && ident_char(blanked[p - 1])) || (p + n < blanked.size() && ident_char(blanked[p + n]))) continue;
      return fmt::format("line {}: {} is not allowed in a kernel (it probes files by path)", line[p], op);
    }
  }
  return "";
}

std::string assembly_policy_violation(const std::string& assembly) {
  // (GAS's file readers, and whatever can build a directive from pieces: macros, the repetition
  // directives and their aliases, MRI mode)
  static const char* const kDirectives[] = {"incbin", "include", "macro", "altmacro", "purgem", "irp",  "irpc",
                                            "irep",   "irepc",   "rept",  "rep",      "mri"};
  int ln = 1;
  for (size_t i = 0; i < assembly.size(); ++i) {
    if (assembly[i] == '\n') ++ln;
    // anywhere, not only where a statement starts: GAS drops /* */ comments before it reads a
    // statement, so `x:/**/.incbin` is one (a string holding such a word is refused too)
    if (assembly[i] != '.') continue;
    size_t j = i + 1;
    std::string word;
    while (j < assembly.size() && ident_char(assembly[j])) word += char(std::tolower(static_cast<unsigned char>(assembly[j++])));
    for (const char* d : kDirectives)
      if (word == d)
        return fmt::format("assembly line {}: .{}: an assembler directive that reads files (or could spell one) is "
                           "not allowed in a kernel (an asm statement, a section or symbol name, or a string the "
                           "kernel holds put the word there)",
                           ln, word);
  }
  return "";
}

std::string KernelSource::content_hash() const { return fnv1a_hex(source); }

}  // namespace thrive::backend
