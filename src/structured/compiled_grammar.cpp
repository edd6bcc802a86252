#include "structured/compiled_grammar.h"

#include "structured/mask_builder.h"

namespace gs::structured {

CompiledGrammar::CompiledGrammar(const Grammar& g, std::shared_ptr<const TokenVocab> vocab)
    : automaton_(g), vocab_(std::move(vocab)), num_rules_(g.rules.size()), entries_(automaton_.num_positions()) {}

CompiledGrammar::~CompiledGrammar() = default;

const MaskEntry& CompiledGrammar::entry(uint32_t pos) const {
  {
    std::lock_guard lock(mu_);
    if (entries_[pos]) return *entries_[pos];
  }
  auto built = std::make_unique<const MaskEntry>(build(pos));
  std::lock_guard lock(mu_);
  if (!entries_[pos]) entries_[pos] = std::move(built);
  return *entries_[pos];
}

void CompiledGrammar::warm() const {
  for (uint32_t p = 0; p < automaton_.num_positions(); ++p)
    if (automaton_.is_scanning(p)) entry(p);
  std::lock_guard lock(build_mu_);  // every entry is built: the DFA is no longer needed
  builder_.reset();
}

MaskEntry CompiledGrammar::build(uint32_t pos) const {
  std::lock_guard lock(build_mu_);
  if (!builder_) builder_ = std::make_unique<MaskBuilder>(automaton_, *vocab_);
  return builder_->build(pos);
}

}  // namespace gs::structured
