// The Responses API (POST /v1/responses), as vLLM serves it, over the chat machinery.
//
// A body's `instructions` (a system message), `input` (a string, or message items whose content
// is a string or input_text / output_text parts) and the conversation of `previous_response_id`
// become a chat request: max_output_tokens is max_tokens; temperature, top_p, top_k, min_p,
// seed, stop and the penalties pass through. The answer is a `response` object (one message
// item of output_text) or, with "stream": true, the event sequence response.created,
// response.in_progress, response.output_item.added, response.content_part.added,
// response.output_text.delta..., response.output_text.done, response.content_part.done,
// response.output_item.done, response.completed. Finished responses are kept in the server's
// ResponseStore unless "store": false. Function tools, non-text formats and non-text inputs
// get a 400 naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "server/generation.h"
#include "server/response_store.h"

namespace gs {

struct ResponsesCall {
  nlohmann::json chat_body;              // the equivalent /v1/chat/completions body
  std::unique_ptr<OutputFormat> format;  // turns the generation into response objects / events
};

// Throws ApiError: 400 for invalid or unsupported fields (and previous_response_id with the
// store off), 404 for a previous_response_id that is not (or no longer) stored.
ResponsesCall prepare_responses_call(const nlohmann::json& body, std::shared_ptr<ResponseStore> store);

}  // namespace gs
