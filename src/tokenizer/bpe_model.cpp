// Implements tokenizer/bpe_model.h.
#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace gs {

size_t metaspace_cut(std::string_view s, size_t from) {
  for (size_t p = s.find(kMetaspace, std::max<size_t>(from, 1)); p != std::string_view::npos;
       p = s.find(kMetaspace, p + 1))
    if (p < kMetaspace.size() || s.substr(p - kMetaspace.size(), kMetaspace.size()) != kMetaspace) return p;
  return s.size();
}

BpeModel::BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options options,
                   const std::string& file)
    : vocab_(std::move(vocab)), opt_(std::move(options)) {
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab_) {
    GS_CHECK(id >= 0, "{}: vocabulary token '{}' has negative id {}", file, tok, id);
    max_id = std::max(max_id, id);
  }
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [tok, id] : vocab_) id_to_token_[static_cast<size_t>(id)] = tok;

  const size_t prefix_len = opt_.continuing_subword_prefix.size();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = token_to_id(a), ib = token_to_id(b);
    GS_CHECK(ia && ib, "{}: merge {} ('{} {}') uses a token missing from the vocabulary", file, rank, a, b);
    const std::string merged = a + b.substr(std::min(prefix_len, b.size()));
    const auto im = token_to_id(merged);
    GS_CHECK(im.has_value(), "{}: merge {} ('{} {}') gives '{}', which is not in the vocabulary", file, rank, a, b,
             merged);
    merges_.try_emplace(pair_key(*ia, *ib), Merge{static_cast<int32_t>(rank), *im});
  }
  if (opt_.unk_token) unk_id_ = token_to_id(*opt_.unk_token);
  cuts_before_metaspace_ = !opt_.ignore_merges && opt_.continuing_subword_prefix.empty() &&
                           opt_.end_of_word_suffix.empty() && vocab_.count(kMetaspace) > 0 &&
                           std::none_of(vocab_.begin(), vocab_.end(),
                                        [](const auto& kv) { return metaspace_cut(kv.first, 1) < kv.first.size(); });
  for (int b = 0; b < 256; ++b)
    byte_ids_[static_cast<size_t>(b)] = token_to_id(fmt::format("<0x{:02X}>", b)).value_or(-1);
}

BpeModel BpeModel::from_json(const nlohmann::json& m, const std::string& file) {
  TokenMap vocab;
  const auto& v = m.at("vocab");
  vocab.reserve(v.size());
  for (const auto& [tok, id] : v.items()) vocab.emplace(tok, id.get<int32_t>());

  std::vector<std::pair<std::string, std::string>> merges;
  const auto& ms = m.contains("merges") ? m.at("merges") : nlohmann::json::array();
  merges.reserve(ms.size());
  for (const auto& e : ms) {
    if (e.is_array()) {
      GS_CHECK(e.size() == 2, "{}: merge entry {} must hold two tokens", file, e.dump());
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      const auto& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      GS_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
               "{}: merge '{}' must be two tokens separated by one space", file, s);
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }
  Options o;
  if (m.contains("unk_token") && m.at("unk_token").is_string()) o.unk_token = m.at("unk_token");
  const auto flag = [&](const char* k) { return m.contains(k) && m.at(k).is_boolean() && m.at(k).get<bool>(); };
  const auto str = [&](const char* k) {
    return m.contains(k) && m.at(k).is_string() ? m.at(k).get<std::string>() : std::string();
  };
  o.byte_fallback = flag("byte_fallback");
  o.fuse_unk = flag("fuse_unk");
  o.ignore_merges = flag("ignore_merges");
  o.continuing_subword_prefix = str("continuing_subword_prefix");
  o.end_of_word_suffix = str("end_of_word_suffix");
  return BpeModel(std::move(vocab), merges, std::move(o), file);
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  const auto& s = id_to_token_[static_cast<size_t>(id)];
  return s.empty() ? nullptr : &s;
}

// One symbol per character (tokenizers' BPE::merge_word before merging): known characters are
// their token, unknown ones become byte-fallback tokens or (fused) unk, or are dropped.
std::vector<int32_t> BpeModel::initial_symbols(std::string_view word) const {
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  bool pending_unk = false;
  const auto flush_unk = [&] {
    if (pending_unk) ids.push_back(*unk_id_);
    pending_unk = false;
  };
  for (size_t i = 0, n = 0; i < word.size(); i += n) {
    utf8::decode_at(word, i, &n);
    std::string s(word.substr(i, n));
    if (i > 0) s.insert(0, opt_.continuing_subword_prefix);
    if (i + n == word.size()) s += opt_.end_of_word_suffix;
    if (const auto id = token_to_id(s)) {
      flush_unk();
      ids.push_back(*id);
      continue;
    }
    if (opt_.byte_fallback) {
      bool all = true;
      for (unsigned char c : word.substr(i, n)) all = all && byte_ids_[c] >= 0;
      if (all) {
        flush_unk();
        for (unsigned char c : word.substr(i, n)) ids.push_back(byte_ids_[c]);
        continue;
      }
    }
    if (!unk_id_) continue;  // no unk token: the character is dropped, as in tokenizers
    if (pending_unk && !opt_.fuse_unk) flush_unk();
    pending_unk = true;
  }
  flush_unk();
  return ids;
}

// Repeatedly applies the lowest-ranked merge (leftmost first), as tokenizers' Word::merge_all.
std::vector<int32_t> BpeModel::merge_all(std::vector<int32_t> ids) const {
  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  std::vector<bool> dead(n, false);
  struct Cand {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> queue;
  const auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const auto it = merges_.find(pair_key(ids[i], ids[next[i]]));
    if (it != merges_.end()) queue.push({it->second.rank, i, it->second.new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    if (dead[c.pos] || next[c.pos] < 0) continue;
    const int right = next[c.pos];
    const auto it = merges_.find(pair_key(ids[c.pos], ids[right]));
    if (it == merges_.end() || it->second.new_id != c.new_id) continue;  // stale entry
    ids[c.pos] = c.new_id;
    dead[right] = true;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i)
    if (!dead[i]) out.push_back(ids[i]);
  return out;
}

std::vector<int32_t> BpeModel::encode_uncached(std::string_view word) const {
  if (opt_.ignore_merges)
    if (const auto id = token_to_id(word)) return {*id};
  return merge_all(initial_symbols(word));
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const bool cacheable = word.size() <= kCacheMaxWord;
  if (cacheable) {
    std::lock_guard lock(cache_->mu);
    if (const auto it = cache_->words.find(word); it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  auto ids = encode_uncached(word);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard lock(cache_->mu);
    if (cache_->words.size() < kCacheCapacity) cache_->words.emplace(std::string(word), std::move(ids));
  }
}

}  // namespace gs
