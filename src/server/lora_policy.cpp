// Implements server/lora_policy.h.
#include "server/lora_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/api_error.h"

namespace gs {

namespace fs = std::filesystem;

bool runtime_lora_switch_on(std::string_view v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  std::string lower(v);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return lower == "true" || lower == "1";
}

std::string model_name_problem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > kMaxModelNameBytes)
    return fmt::format("it is {} bytes long, more than {}", name.size(), kMaxModelNameBytes);
  for (unsigned char c : name)
    if (!std::isalnum(c) && std::string_view("._-/:@+=").find(char(c)) == std::string_view::npos)
      return "it may hold only ASCII letters, digits and . _ - / : @ + =";
  return "";
}

void check_model_name(std::string_view name, const char* param) {
  if (const std::string why = model_name_problem(name); !why.empty())
    bad_param(param, fmt::format("'{}' is not a valid name: {}", param, why));
}

std::string log_safe(std::string_view text) {
  constexpr size_t kMax = 512;
  std::string out;
  for (unsigned char c : text.substr(0, kMax)) {
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '"' || c == '\\')
      out += fmt::format("\\x{:02x}", c);
    else
      out += char(c);
  }
  if (text.size() > kMax) out += fmt::format("...({} bytes)", text.size());
  return out;
}

namespace {

// `p` (canonical) is `root` (canonical) or below it.
bool inside(const fs::path& p, const fs::path& root) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *q != *r) return false;
  return true;
}

std::optional<fs::path> canonical_inside(const fs::path& p, const std::vector<fs::path>& roots, std::string& why) {
  std::error_code ec;
  const fs::path c = fs::canonical(p, ec);
  if (ec) {
    why = fmt::format("'{}': {}", log_safe(p.string()), ec.message());
    return std::nullopt;
  }
  for (const fs::path& r : roots)
    if (inside(c, r)) return c;
  why = fmt::format("'{}' resolves to '{}', outside the LoRA directories (--lora-dir)", log_safe(p.string()),
                    log_safe(c.string()));
  return std::nullopt;
}

}  // namespace

std::optional<fs::path> resolve_adapter_dir(const std::string& path, const std::vector<std::string>& roots,
                                            std::string& why) {
  if (path.find('\0') != std::string::npos) {
    why = "the path holds a NUL byte";
    return std::nullopt;
  }
  std::vector<fs::path> canon_roots;
  for (const std::string& r : roots) {
    std::error_code ec;
    fs::path c = fs::canonical(r, ec);
    if (!ec) canon_roots.push_back(std::move(c));
  }
  if (canon_roots.empty()) {
    why = "no LoRA directory is allowed (start with --lora-dir DIR)";
    return std::nullopt;
  }
  auto dir = canonical_inside(fs::path(path), canon_roots, why);
  if (!dir) return std::nullopt;
  std::error_code ec;
  if (!fs::is_directory(*dir, ec)) {
    why = fmt::format("'{}' is not a directory", log_safe(dir->string()));
    return std::nullopt;
  }
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors"}) {
    auto f = canonical_inside(*dir / file, canon_roots, why);
    if (!f) return std::nullopt;
    if (!fs::is_regular_file(*f, ec)) {
      why = fmt::format("'{}' is not a regular file", log_safe(f->string()));
      return std::nullopt;
    }
  }
  return dir;
}

void refuse_lora_path(const std::string& name) {
  bad_param("lora_path", fmt::format("LoRA adapter '{}' was not loaded: 'lora_path' must name a PEFT adapter directory "
                                     "for this model inside the server's LoRA directories (the server log has the "
                                     "reason)",
                                     name));
}

}  // namespace gs
