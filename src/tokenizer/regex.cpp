// Implements tokenizer/regex.h.
#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace gs {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {
struct MatchData {
  explicit MatchData(const pcre2_code* c) : md(pcre2_match_data_create_from_pattern(c, nullptr)) {
    GS_CHECK(md != nullptr, "out of memory creating a regex match block");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};
}  // namespace

Regex::Regex(const std::string& pattern, const std::string& what) {
  int err = 0;
  PCRE2_SIZE off = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
  if (code->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("{}: invalid regex pattern '{}' at offset {}: {}", what, pattern, off, reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
  code_ = std::move(code);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  MatchData data(code_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    GS_CHECK(rc >= 0, "regex match failed (PCRE2 error {})", rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: skip one character so the scan always advances
      if (b >= text.size()) break;
      size_t n = 1;
      while (b + n < text.size() && (static_cast<unsigned char>(text[b + n]) & 0xC0) == 0x80) ++n;
      start = b + n;
      continue;
    }
    out.emplace_back(b, e);
    start = e;
  }
  return out;
}

}  // namespace gs
