// Bounds on the work and memory one request may cost, checked before the work is done:
//  - a prompt's bytes before it is tokenized: more than max_model_len * longest token * 4 bytes
//    cannot fit the context (each token covers at most `longest token` bytes of the normalized
//    text, and NFC / NFKC shrink text at most 4-fold), so it is refused without tokenizing it;
//  - all stop strings of a request together: kMaxStopBytes (the stop check scans a window as long
//    as the longest stop string after every token, and each choice holds a copy);
//  - the logprob entries one reply can carry: kMaxLogprobEntries (each is ~100 bytes of JSON and a
//    few hundred of memory while the reply is built): choices x tokens x (top alternatives + 1),
//    counting generated tokens only when the reply is not streamed (a stream sends each token's
//    entries as they come) and prompt tokens whenever prompt logprobs are asked for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/engine_client.h"
#include "server/openai_request.h"

namespace gs {

inline constexpr size_t kMaxStopBytes = 4096;
inline constexpr int64_t kMaxLogprobEntries = int64_t(1) << 18;

// The longest prompt, in bytes, that may still fit the context; 0: no bound known.
size_t max_prompt_bytes(const ServedModel& model);
// Throws ApiError 400 (param `param`, code context_length_exceeded) for a longer prompt.
void check_prompt_bytes(size_t bytes, const ServedModel& model, const char* param);
// Tokenizes a prompt of the model (check_prompt_bytes first), stopping once it has more tokens
// than the context allows a prompt (max_model_len - 1): throws ApiError 400 (param `param`, code
// context_length_exceeded) then, without tokenizing the rest.
std::vector<int32_t> encode_prompt(const EngineClient& client, std::string_view text, bool add_special_tokens,
                                   const char* param);
// Throws ApiError 400 (param "stop") when the stop strings together exceed kMaxStopBytes.
void check_stop_bytes(const std::vector<std::string>& stop);
// Throws ApiError 400 (param "logprobs") when the reply could hold more than kMaxLogprobEntries.
void check_logprob_volume(const GenerationRequest& r);

// Requests whose memory is worth giving back to the OS once done (malloc_trim: glibc keeps what
// many small frees release, as a reply's JSON, until told): bodies from kTrimAfterBodyBytes, or
// replies of kTrimAfterEntries tokens x logprob entries.
inline constexpr size_t kTrimAfterBodyBytes = size_t(1) << 20;
inline constexpr int64_t kTrimAfterEntries = int64_t(1) << 14;
bool worth_trimming_after(const GenerationRequest& r);

}  // namespace gs
