// Implements tokenizer/pre_tokenizer.h.
#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace gs {

namespace {

using Span = std::pair<size_t, size_t>;

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Covers [0, size) with the matches and the gaps between them.
std::vector<Segment> segments(const std::vector<Span>& matches, size_t size, bool invert) {
  std::vector<Segment> out;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) out.push_back({pos, b, invert});
    out.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < size) out.push_back({pos, size, invert});
  return out;
}

// Applies a delimiter behaviour (tokenizers' NormalizedString::split).
std::vector<Span> apply_behavior(std::vector<Segment> segs, SplitBehavior behavior) {
  std::vector<Span> out;
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& s : segs) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kRemoved:
      for (const auto& s : segs)
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kContiguous:
      for (const auto& s : segs) {
        if (s.is_match && prev_match && !out.empty())
          out.back().second = s.end;
        else
          out.emplace_back(s.begin, s.end);
        prev_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : segs) {
        if (s.is_match && !prev_match && !out.empty())
          out.back().second = s.end;
        else
          out.emplace_back(s.begin, s.end);
        prev_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->is_match && !prev_match && !out.empty())
          out.back().first = it->begin;
        else
          out.emplace_back(it->begin, it->end);
        prev_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

std::vector<Span> string_matches(const std::string& text, const std::string& pattern) {
  std::vector<Span> out;
  if (pattern.empty()) return out;
  for (size_t hit = text.find(pattern); hit != std::string::npos; hit = text.find(pattern, hit + pattern.size()))
    out.emplace_back(hit, hit + pattern.size());
  return out;
}

// Every character for which `pred` holds is one match.
std::vector<Span> char_matches(const std::string& text, const std::function<bool(char32_t)>& pred) {
  std::vector<Span> out;
  for (size_t i = 0, n = 0; i < text.size(); i += n)
    if (pred(utf8::decode_at(text, i, &n))) out.emplace_back(i, i + n);
  return out;
}

void split_pieces(std::vector<Piece>& pieces, SplitBehavior behavior, bool invert,
                  const std::function<std::vector<Span>(const std::string&)>& find) {
  std::vector<Piece> out;
  for (auto& p : pieces) {
    const auto spans = apply_behavior(segments(find(p.text), p.text.size(), invert), behavior);
    for (auto [b, e] : spans)
      if (e > b) out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
  }
  pieces = std::move(out);
}

bool is_numeric(char32_t cp) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

SplitBehavior parse_behavior(const std::string& s, const std::string& file) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  fail(
      "{}: unknown Split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext or Contiguous)",
      file, s);
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, const std::string& file) {
  PreTokenizer p;
  if (!j.is_null()) p.add(j, file);
  return p;
}

PreTokenizer PreTokenizer::llama_metaspace() {
  PreTokenizer p;
  p.steps_.emplace_back(Metaspace{"\xE2\x96\x81", Prepend::kFirst, false});
  return p;
}

PreTokenizer PreTokenizer::byte_level() {
  PreTokenizer p;
  p.steps_.emplace_back(ByteLevel{false, std::nullopt});
  return p;
}

void PreTokenizer::add(const nlohmann::json& j, const std::string& file) {
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : j.at("pretokenizers")) add(s, file);
  } else if (type == "Split") {
    const auto& pat = j.at("pattern");
    Split s{std::nullopt, "", parse_behavior(j.at("behavior").get<std::string>(), file), j.value("invert", false)};
    if (pat.contains("Regex"))
      s.regex.emplace(pat.at("Regex").get<std::string>(), file);
    else
      s.pattern = pat.at("String").get<std::string>();
    steps_.emplace_back(std::move(s));
  } else if (type == "ByteLevel") {
    ByteLevel b{j.value("add_prefix_space", false), std::nullopt};
    if (j.value("use_regex", true)) b.regex.emplace(kGpt2Pattern, file);
    steps_.emplace_back(std::move(b));
  } else if (type == "Digits") {
    steps_.emplace_back(Digits{j.value("individual_digits", false)});
  } else if (type == "Metaspace") {
    Metaspace m{j.value("replacement", std::string("\xE2\x96\x81")), Prepend::kAlways, j.value("split", true)};
    const std::string scheme = j.contains("prepend_scheme") ? j.at("prepend_scheme").get<std::string>()
                                                            : (j.value("add_prefix_space", true) ? "always" : "never");
    if (scheme == "first")
      m.prepend = Prepend::kFirst;
    else if (scheme == "never")
      m.prepend = Prepend::kNever;
    else
      GS_CHECK(scheme == "always",
               "{}: unknown Metaspace prepend_scheme '{}' (expected "
               "always, first or never)",
               file, scheme);
    steps_.emplace_back(std::move(m));
  } else {
    throw Unsupported(
        fmt::format("{}: unsupported pre_tokenizer type '{}' (supported: Sequence, "
                    "Split, ByteLevel, Digits, Metaspace)",
                    file, type));
  }
}

std::vector<Piece> PreTokenizer::split(std::vector<Piece> pieces) const {
  for (const auto& step : steps_) {
    if (const auto* s = std::get_if<Split>(&step)) {
      split_pieces(pieces, s->behavior, s->invert, [&](const std::string& t) {
        return s->regex ? s->regex->find_all(t) : string_matches(t, s->pattern);
      });
    } else if (const auto* b = std::get_if<ByteLevel>(&step)) {
      if (b->add_prefix_space)
        for (auto& p : pieces)
          if (!p.text.starts_with(' ')) p.text.insert(0, 1, ' ');
      if (b->regex)
        split_pieces(pieces, SplitBehavior::kIsolated, false,
                     [&](const std::string& t) { return b->regex->find_all(t); });
      for (auto& p : pieces) p.text = bytes_to_chars(p.text);
    } else if (const auto* d = std::get_if<Digits>(&step)) {
      split_pieces(pieces, d->individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false,
                   [](const std::string& t) { return char_matches(t, is_numeric); });
    } else if (const auto* m = std::get_if<Metaspace>(&step)) {
      for (auto& p : pieces) {
        p.text = replace_all(p.text, std::nullopt, " ", m->replacement);
        const bool prepend = m->prepend == Prepend::kAlways || (m->prepend == Prepend::kFirst && p.at_start);
        if (prepend && !p.text.starts_with(m->replacement)) p.text.insert(0, m->replacement);
      }
      if (m->split)
        split_pieces(pieces, SplitBehavior::kMergedWithNext, false,
                     [&](const std::string& t) { return string_matches(t, m->replacement); });
    }
  }
  return pieces;
}

}  // namespace gs
