// SamplingParams validation: every bad value is refused with the parameter's name and range.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "types/sampling_params.h"

namespace gs {
namespace {

constexpr int kVocab = 50;

void expect_invalid(void (*mutate)(SamplingParams&), const std::string& needle) {
  SamplingParams p;
  mutate(p);
  try {
    p.validate(kVocab);
    ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SamplingParams, ValidationNamesParameterAndRange) {
  SamplingParams{}.validate(kVocab);
  expect_invalid([](SamplingParams& p) { p.temperature = -1; }, "temperature must be");
  expect_invalid([](SamplingParams& p) { p.top_p = 0; }, "top_p must be in (0, 1]");
  expect_invalid([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  expect_invalid([](SamplingParams& p) { p.top_k = -2; }, "top_k");
  expect_invalid([](SamplingParams& p) { p.min_p = 2; }, "min_p must be in [0, 1]");
  expect_invalid([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  expect_invalid([](SamplingParams& p) { p.presence_penalty = 3; }, "presence_penalty must be in [-2, 2]");
  expect_invalid([](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty");
  expect_invalid([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be >= 1");
  expect_invalid([](SamplingParams& p) { p.min_tokens = 20; }, "min_tokens");
  expect_invalid([](SamplingParams& p) { p.stop_token_ids = {kVocab}; }, "stop_token_ids");
  expect_invalid([](SamplingParams& p) { p.stop = {""}; }, "stop");
  expect_invalid([](SamplingParams& p) { p.logprobs = 21; }, "logprobs must be in [0, 20]");
  expect_invalid([](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }, "logit_bias: 50 is not a token id");
  expect_invalid([](SamplingParams& p) { p.logit_bias = {{3, 101.0f}}; }, "logit_bias: the bias of token 3");
  expect_invalid([](SamplingParams& p) { p.logit_bias.assign(769, {1, 0.0f}); }, "logit_bias: at most 768");
}

TEST(SamplingParams, TinyTemperaturesAreGreedy) {
  SamplingParams p;
  p.temperature = 1e-40f;
  p.validate(kVocab);
  EXPECT_TRUE(p.greedy());
  p.temperature = 1e-3f;
  EXPECT_FALSE(p.greedy());
}

}  // namespace
}  // namespace gs
