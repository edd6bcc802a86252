// Implements apps/vllm_flags.h.
#include "apps/vllm_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>

#include "apps/vllm_flag_table.h"
#include "core/error.h"

namespace gs {
namespace {

// Multi-letter short options (vLLM's argparse has them; CLI11 cannot declare them).
std::map<std::string, std::string> short_forms() {
  std::map<std::string, std::string> m = {
      {"-tp", "--tensor-parallel-size"}, {"-ep", "--enable-expert-parallel"}, {"-cc", "--compilation-config"}};
  for (const VllmFlag& f : vllm_flag_table()) {
    size_t start = f.names.find(',');
    while (start != std::string::npos) {
      const size_t end = f.names.find(',', start + 1);
      m[f.names.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1)] = f.long_name();
      start = end;
    }
  }
  return m;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string note_line(const VllmFlag& f, const std::string& given) {
  if (f.note.empty()) return fmt::format("{}: accepted (what graphserve always does)", given);
  return fmt::format("{}: accepted, no effect: {}", given, f.note);
}

void add_one(CLI::App& cmd, const VllmFlag& f, std::vector<std::string>& notes) {
  const std::string name = f.long_name();
  if (f.arity == FlagArity::Switch) {
    cmd.add_flag_function(
           name + ",!--no-" + name.substr(2),
           [&f, &notes, name](int64_t count) {
             const std::string given = count < 0 ? "--no-" + name.substr(2) : name;
             if (count > 0) GS_CHECK(f.check("").empty(), "{}", f.check(""));
             notes.push_back(note_line(f, given));
           },
           f.note)
        ->group("vLLM compatibility");
    return;
  }
  auto accept = [&f, &notes, name](const std::string& v) {
    const std::string err = f.check(v);
    GS_CHECK(err.empty(), "{}", err);
    notes.push_back(note_line(f, name + " " + v));
  };
  if (f.arity == FlagArity::Values) {
    cmd.add_option_function<std::vector<std::string>>(
           name,
           [accept](const std::vector<std::string>& vs) {
             for (const std::string& v : vs) accept(v);
           },
           f.note)
        ->expected(1, -1)
        ->group("vLLM compatibility");
  } else {
    cmd.add_option_function<std::string>(name, accept, f.note.empty() ? f.refusal : f.note)
        ->group("vLLM compatibility");
  }
}

// vLLM's --cuda-graph-sizes: the capture sizes, or (one value N) 1, 2, 4 and every multiple of 8 up to N.
void add_cuda_graph_sizes(CLI::App& cmd, EngineConfig& cfg) {
  if (cmd.get_option_no_throw("--cuda-graph-sizes")) return;
  cmd.add_option_function<std::vector<std::string>>(
         "--cuda-graph-sizes",
         [&cfg](const std::vector<std::string>& vs) {
           std::vector<long long> sizes;
           for (const std::string& v : vs) sizes.push_back(parse_human_int(v, "--cuda-graph-sizes"));
           if (sizes.size() == 1) {
             const long long n = sizes[0];
             sizes.clear();
             for (long long s : {1, 2, 4})
               if (s <= n) sizes.push_back(s);
             for (long long s = 8; s <= n; s += 8) sizes.push_back(s);
           }
           cfg.compilation.apply_setting("cudagraph_capture_sizes", fmt::format("[{}]", fmt::join(sizes, ",")));
         },
         "CUDA graph capture sizes (vLLM); one value N: 1, 2, 4 and multiples of 8 up to N")
      ->expected(1, -1);
}

}  // namespace

std::vector<std::string> normalize_vllm_args(std::vector<std::string> args) {
  static const std::map<std::string, std::string> shorts = short_forms();
  for (std::string& a : args) {
    const auto eq = a.find('=');
    const std::string key = a.substr(0, eq);
    if (auto it = shorts.find(key); it != shorts.end()) {
      a = it->second + (eq == std::string::npos ? "" : a.substr(eq));
    } else if (a.rfind("--", 0) == 0 && a.rfind("--cc.", 0) != 0) {
      // vLLM's parser reads --max_model_len as --max-model-len.
      std::replace(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(eq == std::string::npos ? a.size() : eq), '_',
                   '-');
    }
  }
  return args;
}

void add_vllm_flags(CLI::App& cmd, EngineConfig& cfg, std::vector<std::string>& notes) {
  add_cuda_graph_sizes(cmd, cfg);
  for (const VllmFlag& f : vllm_flag_table())
    if (!cmd.get_option_no_throw(f.long_name())) add_one(cmd, f, notes);
}

long long parse_human_int(const std::string& text, const std::string& flag) {
  static const std::regex re(R"(\s*(\d+(?:\.\d+)?)([kKmMgGtT]?)\s*)");
  std::smatch m;
  GS_CHECK(std::regex_match(text, m, re), "{}: '{}' is not an integer (examples: 32768, 32k = 32000, 32K = 32768)",
           flag, text);
  const std::string number = m[1], suffix = m[2];
  if (suffix.empty()) {
    GS_CHECK(number.find('.') == std::string::npos, "{}: '{}' is not an integer", flag, text);
    return std::stoll(number);
  }
  const char s = suffix[0];
  const int power = std::string("kmgt").find(static_cast<char>(std::tolower(s))) + 1;
  if (std::islower(static_cast<unsigned char>(s))) return std::llround(std::stod(number) * std::pow(1000.0, power));
  GS_CHECK(number.find('.') == std::string::npos,
           "{}: decimals are not allowed with binary suffixes like {}; did you mean {}{}?", flag, suffix, number,
           static_cast<char>(std::tolower(s)));
  return std::stoll(number) << (10 * power);
}

std::string suggest_flag(const CLI::App& cmd, const std::string& unknown) {
  const std::string key = unknown.substr(0, unknown.find('='));
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 5) + 1;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& l : opt->get_lnames()) {
      const size_t d = edit_distance(key, "--" + l);
      if (d < best_d) {
        best_d = d;
        best = "--" + l;
      }
    }
  }
  return best;
}

}  // namespace gs
